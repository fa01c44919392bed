"""Loading a framework's own Dynamo client, unchanged, from where the user keeps it.

The source is not part of this repository: `fixtures/framework_clients/sources.json` cites it
(repository, path, commit) and pins each file's SHA-256; a client whose files come from several
repositories names each file's own in `origins`. A shim names the environment variable
that points to the file (or checkout) and gets the file's text only when its bytes are the
pinned ones, so that a certification always says which code it judged.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

SOURCES = Path(__file__).resolve().parents[2] / "fixtures" / "framework_clients" / "sources.json"


class SourceUnavailable(RuntimeError):
    """The framework's source is not at hand, or is not the pinned version."""


def pinned(client: str) -> dict:
    return json.loads(SOURCES.read_text())["clients"][client]


def source_text(client: str, variable: str, relative: str | None = None) -> tuple[str, str]:
    """(text, path) of one pinned file of `client`: `variable` names the file itself, or, with
    `relative`, the checkout holding it."""
    entry = pinned(client)
    where = os.environ.get(variable)
    name = relative or next(iter(entry["files"]))
    origin = entry.get("origins", {}).get(name, entry)
    if not where:
        raise SourceUnavailable(
            f"{client}: set {variable} to {entry['environment'][variable]} "
            f"({origin['repository']} at {origin['commit']})"
        )
    path = Path(where) / relative if relative else Path(where)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SourceUnavailable(f"{client}: {variable}: cannot read {path}: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    expected = entry["files"][name]
    if digest != expected:
        raise SourceUnavailable(
            f"{client}: {path} is not {origin['repository']} {origin.get('path', name)} at "
            f"{origin['commit']}: "
            f"sha256 expected {expected}, observed {digest}"
        )
    return data.decode(), str(path)


def definitions(client: str, tree: ast.Module, names: tuple[str, ...]) -> list[ast.stmt]:
    """The module-level functions and assignments called `names`, in that order, as the file
    has them (a shim executes them unchanged where the rest of the module cannot be imported)."""
    found: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name in names:
                found[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in names:
                    found[target.id] = node
    missing = [name for name in names if name not in found]
    if missing:
        raise RuntimeError(f"{client}: the pinned source defines no {missing}")
    return [found[name] for name in names]


def class_methods(
    client: str, tree: ast.Module, owner: str, names: tuple[str, ...]
) -> ast.ClassDef:
    """Class `owner` of the file reduced to its methods `names` (decorators kept): the methods
    run unchanged on an instance holding only the state they read."""
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner)
    methods = [
        n
        for n in cls.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name in names
    ]
    if len(methods) != len(names):
        found = {m.name for m in methods}
        raise RuntimeError(f"{client}: {owner} lacks {sorted(set(names) - found)}")
    return ast.ClassDef(
        name=owner, bases=[], keywords=[], body=methods, decorator_list=[], type_params=[]
    )


Loaded = TypeVar("Loaded")


class Once(Generic[Loaded]):
    """A shim's upstream code, loaded once per process (scenarios start adapters concurrently);
    a load that failed is tried again by the next call."""

    def __init__(self, build: Callable[[], Loaded]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._loaded: Loaded | None = None

    def __call__(self) -> Loaded:
        with self._lock:
            if self._loaded is None:
                self._loaded = self._build()
            return self._loaded

    def forget(self) -> None:
        """Load again on the next call (a test that takes the source away)."""
        with self._lock:
            self._loaded = None


def exec_module(name: str, text: str, path: str) -> types.ModuleType:
    """The source text run as module `name`, registered in `sys.modules` while it runs (as an
    import would) and removed again when it raises."""
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    try:
        exec(compile(text, path, "exec"), module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module
