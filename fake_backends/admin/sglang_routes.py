"""SGLang's engine-route allowlist: ``--engine-route`` / ``DYN_SGLANG_ENGINE_ROUTES``.

Why an allowlist: an SGLang worker exposes engine or tokenizer-manager methods as
``/engine/<path>`` only when the deployment names them at start-up; the request body can
never choose the method.  The descriptor grammar is ``path[=method][:engine|tm]`` (CONTRACT-NOTES
§U5.4) and bad descriptors are start-up errors worded as the 1.6.1 parser words them
(``Invalid SGLang engine route descriptor '<d>': <reason>``), so a harness that feeds a
bad descriptor sees which one and why:

* at most one ``:``; the target is ``engine`` (default) or ``tm``;
* at most one ``=``; without it the method is the path; both must be non-empty;
* the path is ``/``-separated segments of ``[A-Za-z0-9][A-Za-z0-9._-]*``;
* the method is a Python identifier and does not start with ``_``;
* a path may be configured only once; an empty descriptor is an error, an empty
  environment value means no routes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

ENV_VAR = "DYN_SGLANG_ENGINE_ROUTES"
Target = Literal["engine", "tm"]
TARGETS: tuple[Target, ...] = ("engine", "tm")
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class EngineRouteDescriptor:
    path: str
    method: str
    target: Target = "engine"


class EngineRouteError(ValueError):
    """A descriptor (or the method it names) that the worker refuses at start-up."""


def _invalid(descriptor: str, reason: str) -> EngineRouteError:
    return EngineRouteError(f"Invalid SGLang engine route descriptor {descriptor!r}: {reason}")


def _parse_one(descriptor: str) -> EngineRouteDescriptor:
    if descriptor.count(":") > 1:
        raise _invalid(descriptor, "expected at most one ':' target separator")
    target: Target = "engine"
    head = descriptor
    if ":" in descriptor:
        head, raw_target = descriptor.rsplit(":", 1)
        if not head or not raw_target:
            raise _invalid(descriptor, "both the route and target are required")
        if raw_target not in TARGETS:
            raise _invalid(descriptor, f"unknown target {raw_target!r}; expected 'engine' or 'tm'")
        target = "tm" if raw_target == "tm" else "engine"
    if head.count("=") > 1:
        raise _invalid(descriptor, "expected at most one '=' method separator")
    path, has_method, method = head.partition("=")
    if not has_method:
        method = path
    if not path or not method:
        raise _invalid(descriptor, "both the route path and method are required")
    if not all(_SEGMENT.fullmatch(segment) for segment in path.split("/")):
        raise _invalid(
            descriptor,
            "the route path must contain non-empty '/'-separated segments "
            "using only letters, digits, '.', '_', and '-'",
        )
    if not method.isidentifier():
        raise _invalid(descriptor, f"method {method!r} is not a Python identifier")
    if method.startswith("_"):
        raise _invalid(descriptor, "private methods cannot be exposed")
    return EngineRouteDescriptor(path, method, target)


def parse_engine_routes(values: str | Sequence[str] | None) -> list[EngineRouteDescriptor]:
    """Parse descriptors: a whitespace-separated string (the env form) or a list (flags)."""
    if values is None:
        return []
    raw = values.split() if isinstance(values, str) else list(values)
    out: list[EngineRouteDescriptor] = []
    seen: set[str] = set()
    for position, item in enumerate(raw, start=1):
        descriptor = item.strip()
        if not descriptor:
            raise EngineRouteError(
                f"Invalid SGLang engine route descriptor at position {position}: "
                "descriptor is empty"
            )
        parsed = _parse_one(descriptor)
        if parsed.path in seen:
            raise _invalid(descriptor, f"route path {parsed.path!r} is configured more than once")
        seen.add(parsed.path)
        out.append(parsed)
    return out


def engine_routes_from(
    flags: Sequence[str] | None, env_value: str | None
) -> list[EngineRouteDescriptor]:
    """Flags win; without any ``--engine-route`` the environment variable applies."""
    if flags:
        return parse_engine_routes(list(flags))
    return parse_engine_routes(env_value)
