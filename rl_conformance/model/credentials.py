"""The credentials a run sends to the deployment at `--frontend`, per plane, and which plane a
request belongs to.

A Dynamo deployment has three planes, and each takes its own credentials:

| plane | its URLs | headers | bearer token |
|---|---|---|---|
| frontend | `--frontend` | `--header` | `--token-file`, `--token-env` |
| RL listener | `--rl-url` | `--rl-header` | `--rl-token-file`, `--rl-token-env` |
| worker system servers | `--worker-url`, `system_url` | `--admin-header` | `--admin-token-*` |

`--header 'NAME: VALUE'` is repeatable, and `--header @FILE` reads one header per line, as
curl's `-H @FILE` does; a token (the first line of FILE, or the variable's value) is sent as
`Authorization: Bearer TOKEN`. Neither needs a secret on the command line. A token file is read
again whenever it changes, so a token rotated during a long run (a projected service-account
token, a sidecar's) is the one sent.

Inheritance: the RL listener is served by the frontend's own process, so it receives the
frontend's headers and token, overridden name by name by its own; `--rl-header 'NAME:'` (nothing
after the colon) sends it no NAME, as curl's `-H 'NAME:'` removes a header. The workers' system
servers receive only the `--admin-*` credentials, never the frontend's.

Routing: a request belongs to the plane whose URL (`--frontend`, `--rl-url`, `--worker-url`) is
the longest prefix of its own; any other URL is a worker's system server that discovery listed,
and receives the admin credentials, unless it is on the frontend's or the listener's origin (a
path no flag named), which receives none.

The query string of a URL given by flag (`?key=...`, as some gateways authenticate) is sent on
every request under that URL; `--secret-query-param NAME` marks a parameter secret. A URL with
user information (`http://user:password@host`) is refused: it would be written wherever the URL
is. Every secret is registered with the redactor (`rl_conformance.redaction`) as soon as it is
read, with the shell reference that stands for it in everything the run writes.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

from ..errors import ConfigurationError
from ..redaction import REDACTOR, Redactor
from .token_file import TokenFile, bearer_characters

FRONTEND, LISTENER, WORKERS = "frontend", "rl", "admin"


@dataclass(frozen=True)
class PlaneFlags:
    """How a plane's credentials are given: by flags, or by the keys of a targets file's table
    (`where` names the file and the table; `model/deployment.py`)."""

    title: str
    header: str
    token_file: str
    token_env: str
    prefix: str
    """Of the variables a reproducer reads a value given on the command line from."""
    where: str = ""

    def at(self, name: str) -> str:
        """`name` (a flag, or a key) as a message's subject: with the file and table for a key."""
        return f"{self.where} {name}" if self.where else name

    @property
    def how(self) -> str:
        if self.where:
            return (
                f'{self.header} = ["@FILE"] or ["NAME: ${{VAR}}"], {self.token_file} = "FILE" '
                f'or {self.token_env} = "VAR" in {self.where}'
            )
        return f"{self.header} 'NAME: VALUE', {self.token_file} FILE or {self.token_env} VAR"


PLANES: Mapping[str, PlaneFlags] = {
    FRONTEND: PlaneFlags("frontend", "--header", "--token-file", "--token-env", "FRONTEND"),
    LISTENER: PlaneFlags("RL listener", "--rl-header", "--rl-token-file", "--rl-token-env", "RL"),
    WORKERS: PlaneFlags(
        "worker system server",
        "--admin-header",
        "--admin-token-file",
        "--admin-token-env",
        "ADMIN",
    ),
}
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""`${VAR}` in a header's value or a secret query parameter's: the environment variable's value."""
URL_FLAGS = {FRONTEND: "--frontend", LISTENER: "--rl-url", WORKERS: "--worker-url"}
MANAGED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "accept-encoding",
        "x-rl-rollout-id",
        "x-rl-attempt-id",
        "x-rl-policy-version",
    }
)
"""Headers the client sets itself: the request's framing and the suite's identity headers."""


@dataclass(frozen=True)
class Sent:
    """One header or query parameter sent with a plane's requests. `shown` is what is recorded
    in its place: the value with its secret replaced by the secret's shell reference."""

    name: str
    value: str = field(repr=False)
    shown: str
    source: str
    """The flag that gave it, for messages (`--token-env DYNAMO_TOKEN`)."""
    renewed: Callable[[], str] | None = field(default=None, repr=False, compare=False)
    """Where the value is read again before each request (a token file), when it may change."""

    def current(self) -> str:
        """The value to send now."""
        return self.renewed() if self.renewed is not None else self.value


@dataclass(frozen=True)
class Plane:
    key: str
    headers: tuple[Sent, ...] = ()
    named: PlaneFlags | None = None
    """How its credentials are given (default: the flags, `PLANES`)."""

    @property
    def flags(self) -> PlaneFlags:
        return self.named or PLANES[self.key]

    def given(self) -> str:
        """The sources of its credentials, for messages ("" when none was given)."""
        return ", ".join(dict.fromkeys(sent.source for sent in self.headers))


@dataclass(frozen=True)
class Base:
    """A URL given by flag, without its query, the plane it is, and its query parameters."""

    url: str
    plane: str
    query: tuple[Sent, ...] = ()


@dataclass(frozen=True)
class Applied:
    """A request's URL as sent and as recorded, and the credential headers it carries."""

    url: str
    recorded_url: str
    headers: tuple[Sent, ...] = ()


@dataclass(frozen=True)
class Credentials:
    planes: Mapping[str, Plane] = field(default_factory=dict)
    bases: tuple[Base, ...] = ()

    @property
    def given(self) -> bool:
        return any(plane.headers for plane in self.planes.values()) or any(
            base.query for base in self.bases
        )

    def plane(self, key: str) -> Plane:
        return self.planes.get(key) or Plane(key)

    def base_url(self, given: str) -> str:
        """The URL a flag gave, without its query (what the target is reached by)."""
        return strip_query(given)

    def route(self, url: str) -> tuple[Plane | None, Base | None]:
        """The plane a request to `url` belongs to (see the module), and the URL given by flag
        it is under; (None, None) for a URL no credential goes to."""
        under = [base for base in self.bases if is_under(url, base.url)]
        if under:
            base = max(under, key=lambda found: len(found.url))
            return self.plane(base.plane), base
        known = {origin(base.url) for base in self.bases if base.plane != WORKERS}
        if origin(url) in known:
            return None, None
        return self.plane(WORKERS), None

    def apply(self, url: str) -> Applied:
        plane, base = self.route(url)
        headers = plane.headers if plane is not None else ()
        if base is None or not base.query:
            return Applied(url, url, headers)
        return Applied(
            with_query(url, [(sent.name, quote(sent.value, safe="")) for sent in base.query]),
            with_query(url, [(sent.name, sent.shown) for sent in base.query]),
            headers,
        )


def origin(url: str) -> str:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = None
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"


def is_under(url: str, base: str) -> bool:
    """Whether `url` is `base` or below it (same origin, and the base's path a prefix of its
    path at a segment boundary)."""
    if origin(url) != origin(base):
        return False
    path, prefix = urlsplit(url).path, urlsplit(base).path.rstrip("/")
    return path == prefix or path.startswith(prefix + "/") or not prefix


def strip_query(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def with_query(url: str, pairs: Sequence[tuple[str, str]]) -> str:
    """`url` with these parameters (already encoded) in place of any of the same names."""
    parts = urlsplit(url)
    names = {name for name, _ in pairs}
    kept = [
        piece
        for piece in parts.query.split("&")
        if piece and unquote(piece.partition("=")[0]) not in names
    ]
    query = "&".join([*kept, *(f"{quote(name, safe='')}={value}" for name, value in pairs)])
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


class _References:
    """Unique shell references for values given on the command line: `$FRONTEND_X_API_KEY`,
    `$FRONTEND_X_API_KEY_2` for a second value of the same name."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.taken: dict[str, str] = {}

    def register(self, value: str, reference: str) -> str:
        self.taken.setdefault(reference, value)
        return self.redactor.add(value, reference)

    def named(self, prefix: str, name: str, value: str) -> str:
        stem = f"${prefix}_{re.sub(r'[^A-Za-z0-9]+', '_', name).strip('_').upper()}"
        reference, count = stem, 1
        while self.taken.get(reference, value) != value:
            count += 1
            reference = f"{stem}_{count}"
        return self.register(value, reference)


def read_credentials(
    *,
    frontend: str | None,
    rl_url: str | None,
    worker_urls: Iterable[str],
    headers: Mapping[str, Sequence[str]],
    token_files: Mapping[str, str | None],
    token_envs: Mapping[str, str | None],
    secret_query_params: Iterable[str] = (),
    redactor: Redactor = REDACTOR,
    planes: Mapping[str, PlaneFlags] = PLANES,
    url_flags: Mapping[str, str] = URL_FLAGS,
) -> Credentials:
    """A deployment's credentials (each plane's `headers`, `token_files` and `token_envs` by
    plane key), every secret registered with `redactor` as it is read; `ConfigurationError`
    naming the flag (never the value) for anything unreadable. `planes` and `url_flags` name
    the inputs in messages: the flags, or the keys of a targets file's table."""
    references = _References(redactor)
    secret_names = set(secret_query_params)
    for name in secret_names:
        redactor.mark_query_parameter(name)
    own: dict[str, tuple[list[Sent], set[str]]] = {}
    for key, flags in planes.items():
        sent, removed = _plane_headers(key, flags, headers.get(key, ()), references)
        token = _token(flags, token_files.get(key), token_envs.get(key), references)
        if token is not None:
            clash = next((s for s in sent if s.name.lower() == "authorization"), None)
            if clash is not None:
                other = flags.token_file if token_files.get(key) else flags.token_env
                raise ConfigurationError(
                    f"{clash.source} Authorization and {other}: expected one Authorization "
                    f"for the {flags.title}, observed both"
                )
            sent.append(token)
        own[key] = (sent, removed)
    inherited = {
        sent.name.lower(): sent
        for sent in own[FRONTEND][0]
        if sent.name.lower() not in own[LISTENER][1]
    }
    inherited.update({sent.name.lower(): sent for sent in own[LISTENER][0]})
    named = {
        FRONTEND: Plane(FRONTEND, tuple(own[FRONTEND][0]), planes[FRONTEND]),
        LISTENER: Plane(LISTENER, tuple(inherited.values()), planes[LISTENER]),
        WORKERS: Plane(WORKERS, tuple(own[WORKERS][0]), planes[WORKERS]),
    }
    bases = []
    for url, plane in (
        (frontend, FRONTEND),
        (rl_url, LISTENER),
        *((given, WORKERS) for given in worker_urls),
    ):
        if url:
            flags = planes[plane]
            bases.append(
                _base(flags.at(url_flags[plane]), url, flags, plane, secret_names, references)
            )
    return Credentials(named, tuple(bases))


def _plane_headers(
    key: str, flags: PlaneFlags, items: Sequence[str], references: _References
) -> tuple[list[Sent], set[str]]:
    """A plane's own headers, and the names it removes from what it inherits."""
    sent: list[Sent] = []
    removed: set[str] = set()
    seen: dict[str, str] = {}
    for item in items:
        for source, line in _header_lines(flags.at(flags.header), item):
            name, value = _parse_header(source, line)
            if name.lower() in seen:
                raise ConfigurationError(
                    f"{source} {name}: expected each header once for the {flags.title}, observed "
                    f"{name} again (first from {seen[name.lower()]})"
                )
            seen[name.lower()] = source
            if value is None:
                if key != LISTENER:
                    raise ConfigurationError(
                        f"{source} {name}: expected a value after the colon (an empty one "
                        "removes a header the RL listener inherits, which only --rl-header does)"
                    )
                removed.add(name.lower())
                continue
            if ENV_REFERENCE.search(value):
                given, value = value, _from_environment(f"{source} {name}", value, references)
                reference = references.register(value, given)
            else:
                reference = references.named(flags.prefix, name, value)
            scheme, _, credential = value.partition(" ")
            if credential.strip() and re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", scheme):
                references.register(credential.strip(), reference)  # the part a server may echo
            sent.append(Sent(name, value, reference, f"{flags.at(flags.header)} {name}"))
    return sent, removed


def _from_environment(source: str, value: str, references: _References) -> str:
    """`value` with each `${VAR}` replaced by the variable's value (each registered as `$VAR`);
    `ConfigurationError` naming the variable when one is not set."""

    def read(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ConfigurationError(
                f"{source}: the variable {name} is not set in this environment (export it)"
            )
        found = os.environ[name]
        if found:
            references.register(found, f"${name}")
        return found

    resolved = ENV_REFERENCE.sub(read, value)
    if any(char in resolved for char in "\r\n\0"):
        raise ConfigurationError(f"{source}: expected a value of one line")
    return resolved


def _header_lines(flag: str, item: str) -> list[tuple[str, str]]:
    """(source, line) pairs: the item itself, or the header lines of the file `@FILE` names
    (blank lines and `#` comments left out)."""
    if not item.startswith("@"):
        return [(flag, item)]
    path = item[1:]
    source = f"{flag} @{path}"
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigurationError(f"{source}: cannot be read ({why})") from None
    lines = [line for line in text.splitlines() if line.strip() and line.lstrip()[0] != "#"]
    if not lines:
        raise ConfigurationError(f"{source}: expected header lines 'NAME: VALUE', observed none")
    return [(source, line) for line in lines]


def _parse_header(source: str, line: str) -> tuple[str, str | None]:
    """(name, value) of `NAME: VALUE`; value None for `NAME:` (remove). The messages never
    quote the value: a line mistyped may be a secret."""
    name, colon, value = line.partition(":")
    name = name.strip()
    if not colon:
        raise ConfigurationError(
            f"{source}: expected 'NAME: VALUE' (a header name, a colon, its value), observed no "
            "colon"
        )
    if not HEADER_NAME.fullmatch(name):
        raise ConfigurationError(
            f"{source}: expected 'NAME: VALUE' with a header name of letters, digits and "
            f"!#$%&'*+.^_`|~-, observed {len(name)} character(s) before the colon that are not one"
        )
    if name.lower() in MANAGED_HEADERS:
        raise ConfigurationError(
            f"{source} {name}: the client sets this header itself; it cannot be given"
        )
    value = value.strip()
    if any(char in value for char in "\r\n\0"):
        raise ConfigurationError(f"{source} {name}: expected a value of one line")
    return name, value or None


def _token(
    flags: PlaneFlags, file: str | None, env: str | None, references: _References
) -> Sent | None:
    """`Authorization: Bearer TOKEN` from a file's first line or a variable, or None."""
    if file and env:
        raise ConfigurationError(
            f"{flags.at(flags.token_file)} and {flags.token_env}: expected one source of the "
            f"{flags.title}'s token, observed both"
        )
    if file:
        source = f"{flags.at(flags.token_file)} {file}"
        try:
            lines = Path(file).expanduser().read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConfigurationError(f"{source}: cannot be read ({why})") from None
        rest = [line for line in lines[1:] if line.strip()]
        token, reference = (lines[0] if lines else "").strip(), f"$(cat {shlex.quote(file)})"
        if rest:
            references.register(token, reference)
            raise ConfigurationError(f"{source}: expected the token alone on one line")
    elif env:
        source = f"{flags.at(flags.token_env)} {env}"
        if not ENV_NAME.fullmatch(env):
            raise ConfigurationError(
                f"{source}: expected the name of an environment variable (letters, digits, _)"
            )
        if env not in os.environ:
            raise ConfigurationError(
                f"{source}: the variable is not set in this environment (export it, or give "
                f"{flags.token_file} FILE)"
            )
        token, reference = os.environ[env].strip(), f"${env}"
    else:
        return None
    if token:
        references.register(token, reference)
    if not token:
        raise ConfigurationError(f"{source}: expected a token, observed an empty one")
    if not bearer_characters(token):
        raise ConfigurationError(
            f"{source}: expected a token without spaces or control characters (a bearer "
            "token's characters), observed some"
        )
    renewed = None
    if file:
        renewed = TokenFile(
            Path(file).expanduser(), token, lambda new: references.register(new, reference)
        )
    return Sent("Authorization", f"Bearer {token}", f"Bearer {reference}", source, renewed)


def _base(
    flag: str,
    url: str,
    flags: PlaneFlags,
    plane: str,
    secret_names: set[str],
    references: _References,
) -> Base:
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    if user:
        references.register(user, f"${flags.prefix}_USERINFO")
        password = user.partition(":")[2]
        if password:
            references.register(password, f"${flags.prefix}_PASSWORD")
        how = (
            flags.how
            if flags.where
            else f"{flags.header} 'Authorization: Basic ...', {flags.token_file} FILE or "
            f"{flags.token_env} VAR"
        )
        raise ConfigurationError(
            f"{flag}: expected a URL without credentials, observed user information before its "
            f"host (user:password@, which would be written wherever the URL is): give them with "
            f"{how}"
        )
    query = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in secret_names:
            source = f"{flag} ?{name}="
            if ENV_REFERENCE.search(value):
                given, value = value, _from_environment(source, value, references)
                reference = references.register(value, given) if value else ""
            else:
                reference = references.named(flags.prefix, name, value) if value else ""
            query.append(Sent(name, value, reference, source))
        else:
            query.append(Sent(name, value, quote(value, safe=""), flag))
    return Base(strip_query(url), plane, tuple(query))


__all__ = [
    "FRONTEND",
    "LISTENER",
    "PLANES",
    "WORKERS",
    "Applied",
    "Base",
    "Credentials",
    "Plane",
    "PlaneFlags",
    "Sent",
    "is_under",
    "read_credentials",
    "strip_query",
    "with_query",
]
