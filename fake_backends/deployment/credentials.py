"""An authenticating ingress in front of a plane of a fake deployment, as `vllm serve --api-key`
or an ingress with authentication stands in front of a real one: a request that lacks any
required header or query parameter, or carries another value, is answered 401 with vLLM's body
(`{"error": "Unauthorized"}`) and `WWW-Authenticate: Bearer`, whatever its path.

Planes: `frontend`, `rl` (the RL listener) and `system` (every worker's system server). The fault
control port is never guarded: it is ours, not the deployment's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

PLANES = ("frontend", "rl", "system")
UNAUTHORIZED = json.dumps({"error": "Unauthorized"}).encode()


@dataclass(frozen=True)
class Required:
    """What one plane requires of every request."""

    headers: tuple[tuple[str, str], ...] = ()
    query: tuple[tuple[str, str], ...] = ()

    def admits(self, scope: Scope) -> bool:
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope.get("headers", [])
        }
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        return all(headers.get(name.lower()) == value for name, value in self.headers) and all(
            query.get(name) == value for name, value in self.query
        )


@dataclass(frozen=True)
class RequiredCredentials:
    planes: Mapping[str, Required] = field(default_factory=dict)

    @classmethod
    def parse(cls, headers: Iterable[str] = (), query: Iterable[str] = ()) -> RequiredCredentials:
        """From `PLANE=NAME: VALUE` header items and `PLANE=NAME=VALUE` query items;
        ValueError naming the item's plane and form for one it cannot read."""
        found: dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]]]] = {}
        for items, separator, form, at in (
            (headers, ":", "NAME: VALUE", 0),
            (query, "=", "NAME=VALUE", 1),
        ):
            for item in items:
                plane, _, rest = item.partition("=")
                name, sep, value = rest.partition(separator)
                if plane not in PLANES:
                    raise ValueError(f"expected PLANE={form} with PLANE one of {', '.join(PLANES)}")
                if not sep or not name.strip() or not value.strip():
                    raise ValueError(f"expected {plane}={form}, with a name and a value")
                found.setdefault(plane, ([], []))[at].append((name.strip(), value.strip()))
        return cls({plane: Required(tuple(h), tuple(q)) for plane, (h, q) in found.items()})

    def guard(self, listener_name: str, app: ASGIApp) -> ASGIApp:
        """`app` behind the plane's requirements (the listener's own app when it has none)."""
        plane = "system" if listener_name.startswith("system-") else listener_name
        required = self.planes.get(plane)
        return app if required is None else Authenticating(app, required)


class Authenticating:
    def __init__(self, app: ASGIApp, required: Required) -> None:
        self.app = app
        self.required = required

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.required.admits(scope):
            await self.app(scope, receive, send)
            return
        headers: list[Any] = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(UNAUTHORIZED)).encode()),
            (b"www-authenticate", b"Bearer"),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": UNAUTHORIZED})
