"""A targets file (`--targets FILE`): the deployments a run tests by URL, one TOML table each.

    [vllm-prod]                          # the table's name is the deployment's column
    frontend = "https://vllm.fleet.example"
    rl_url = "https://vllm.fleet.example:8001"
    backend = "vllm"
    token_env = "VLLM_TOKEN"             # the name of a variable, never the token

A table's keys are the deployment flags' names (`deployment.FILE_KEYS`: `--rl-url` is `rl_url`,
a repeatable flag's key is plural and takes a list: `worker_urls`, `workers`,
`update_model_paths`); each becomes a `Deployment`, checked by the same rules as the flags
(`Deployment.check`). A relative path is relative to the file's directory, as a header file
(`"@FILE"`) is.

Credentials are written only by reference: `token_env` (a variable's name), `token_file` (a
file's path), a header as `"@FILE"` (a file of header lines) or `"NAME: ${VAR}"` (its value read
from the variable VAR), a secret query parameter as `key=${VAR}`. A value written in the file is
refused in one sentence that never quotes it: whoever reads the file would read the secret.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..errors import ConfigurationError
from .credentials import ENV_REFERENCE
from .deployment import FILE_KEYS, Deployment, Naming
from .options import BY_NAME

TABLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A table's name: the deployment's column in the matrix, in test ids and file names."""
OPTION_OF_KEY = {key: name for name, key in FILE_KEYS.items()}
CREDENTIAL_WORDS = re.compile(r"token|secret|passw|key|auth|cookie|credential", re.IGNORECASE)
HEADER_KEYS = ("header", "rl_header", "admin_header")
BY_REFERENCE = (
    'token_env = "VAR", token_file = "FILE", headers = ["NAME: ${VAR}"] or headers = ["@FILE"]'
)
NEVER_WRITTEN = "is never written in the targets file, where anyone who reads the file reads it"


def load_targets(path: str) -> tuple[Deployment, ...]:
    """The deployments of the targets file at `path` (see the module); `ConfigurationError`
    naming the file, the table and the key, never a value a secret could be."""
    shown = display(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigurationError(f"--targets {shown}: cannot be read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"--targets {shown}: expected UTF-8 TOML text") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"--targets {shown}: not TOML: {exc}") from None
    where = f"--targets {shown}"
    expected = "expected one table per deployment ([NAME] and its keys below it)"
    if not document:
        raise ConfigurationError(f"{where}: {expected}, observed none")
    deployments = []
    for table, body in document.items():
        if not isinstance(body, dict):
            raise ConfigurationError(
                f"{where}: {expected}, observed the key {table!r} outside any table"
            )
        if not TABLE_NAME.fullmatch(table):
            raise ConfigurationError(
                f"{shown} [{table}]: expected a table name of at most 64 letters, digits and "
                "._- starting with a letter or digit (it is the deployment's column in the "
                "matrix)"
            )
        deployments.append(deployment(Naming(shown, table), body, Path(path).parent))
    return tuple(deployments)


def deployment(naming: Naming, body: dict[str, Any], base: Path) -> Deployment:
    """One table as a `Deployment`: its keys known and typed, relative paths resolved against
    `base`, and no credential written in it."""
    if not body:
        raise ConfigurationError(
            f"{naming.where}: expected the keys of a deployment (frontend, backend, ...), "
            "observed none"
        )
    values: dict[str, Any] = {}
    for key, value in body.items():
        name = OPTION_OF_KEY.get(key)
        if name is None:
            raise ConfigurationError(unknown_key(naming, key, value))
        values[name] = typed(naming, name, value, base)
    refuse_written_secrets(naming, values)
    return Deployment(naming=naming, name=naming.table, **values)


def unknown_key(naming: Naming, key: str, value: Any) -> str:
    close = difflib.get_close_matches(key, sorted(OPTION_OF_KEY), n=2, cutoff=0.6)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    if isinstance(value, str) and CREDENTIAL_WORDS.search(key):
        return (
            f"{naming.where} {key}: a credential {NEVER_WRITTEN}: say where it is instead, with "
            f"{BY_REFERENCE}{hint}"
        )
    if isinstance(value, dict):
        hint += f" ([{naming.table}.{key}] is a table inside [{naming.table}]: quote a name "
        hint += f'that holds a dot, ["{naming.table}.{key}"])'
    return f"{naming.where} {key}: not a key of a deployment{hint}; the keys are " + ", ".join(
        FILE_KEYS.values()
    )


def typed(naming: Naming, name: str, value: Any, base: Path) -> Any:
    """The value of option `name` as `RunConfig` holds it; `ConfigurationError` naming the key
    and the type expected and observed (never the value itself)."""
    option = BY_NAME[name]
    where = naming.at(name)
    if option.kind == "flag":
        if not isinstance(value, bool):
            raise ConfigurationError(f"{where}: expected true or false, observed {kind_of(value)}")
        return value
    if option.kind in ("list", "int-list"):
        wanted: type = int if option.kind == "int-list" else str
        what = "integers" if wanted is int else "strings"
        if not isinstance(value, list) or any(
            not isinstance(item, wanted) or isinstance(item, bool) for item in value
        ):
            observed = kind_of(value) if not isinstance(value, list) else "other items"
            raise ConfigurationError(f"{where}: expected a list of {what}, observed {observed}")
        items = tuple(value)
    else:
        if not isinstance(value, str) or not value.strip():
            observed = "an empty string" if isinstance(value, str) else kind_of(value)
            raise ConfigurationError(f"{where}: expected a string, observed {observed}")
        items = (value,)
    if option.choices is not None:
        for item in items:
            if item not in option.choices:
                raise ConfigurationError(
                    f"{where}: expected one of {', '.join(option.choices)}, observed {item!r}"
                )
    if option.path:
        items = tuple(resolve(str(item), base) for item in items)
    if name in HEADER_KEYS:
        items = tuple(f"@{resolve(i[1:], base)}" if i.startswith("@") else i for i in items)
    return items if option.kind in ("list", "int-list") else items[0]


def refuse_written_secrets(naming: Naming, values: dict[str, Any]) -> None:
    """A header's value or a secret query parameter's written in the file (see the module)."""
    for name in HEADER_KEYS:
        for entry in values.get(name, ()):
            _, colon, value = entry.partition(":")
            removal = colon and not value.strip()  # `NAME:` sends the RL listener no NAME
            if entry.startswith("@") or removal or ENV_REFERENCE.search(value):
                continue
            raise ConfigurationError(
                f"{naming.at(name)}: a header's value {NEVER_WRITTEN}: give "
                '"NAME: ${VAR}" (its value read from the environment variable VAR) or "@FILE" '
                "(a file of header lines)"
            )
    secret = set(values.get("secret_query_param", ()))
    urls = [("frontend", values.get("frontend")), ("rl_url", values.get("rl_url"))]
    for name, url in [*urls, *(("worker_url", url) for url in values.get("worker_url", ()))]:
        for parameter, value in parse_qsl(urlsplit(url or "").query, keep_blank_values=True):
            if parameter in secret and value and not ENV_REFERENCE.fullmatch(value):
                raise ConfigurationError(
                    f"{naming.at(name)}: the value of the secret query parameter {parameter} "
                    f"{NEVER_WRITTEN}: give {parameter}=${{VAR}}, read from the environment "
                    "variable VAR"
                )


def resolve(value: str, base: Path) -> str:
    """A path of the file, relative to its directory (`~` expanded; a URL kept as given)."""
    if "://" in value:
        return value
    return os.path.abspath(base / os.path.expanduser(value))


def display(path: str) -> str:
    """The file as messages name it: relative to the working directory when under it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def kind_of(value: Any) -> str:
    """A TOML value's type, for a message (never the value: it may be a secret)."""
    for kind, phrase in (
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a number"),
        (str, "a string"),
        (list, "a list"),
        (dict, "a table"),
    ):
        if isinstance(value, kind):
            return phrase
    return f"a {type(value).__name__}"
