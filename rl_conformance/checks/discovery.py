"""Checks of the RL discovery listener's `GET /v1/rl/workers` body (protocol version 1)."""

from __future__ import annotations

from collections import Counter
from operator import itemgetter
from typing import Any

from .. import contract
from .base import MISSING, Findings, Level, Violation, check, describe, get_path, is_int

SECTION = "Discover Workers Safely"
PROTOCOL_VERSION = 1
OPTIONAL_WORKER_FIELDS = ("system_url", "admin_base_url", "model", "world_size", "error")
MAX_U64 = 2**64 - 1
STABLE_FIELDS = ("transport", "request_plane_url", "system_url", "model", "routes")


def workers_of(body: Any) -> list[dict[str, Any]]:
    """The worker objects of a body whose protocol version has already been checked."""
    workers = get_path(body, "workers")
    if not isinstance(workers, list):
        return []
    return [worker for worker in workers if isinstance(worker, dict)]


def identity(worker: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """A worker's identity: never its position in the list."""
    try:
        return _IDENTITY(worker)
    except KeyError:
        return (
            worker.get("namespace"),
            worker.get("component"),
            worker.get("endpoint"),
            worker.get("instance_id"),
        )


_IDENTITY = itemgetter("namespace", "component", "endpoint", "instance_id")
_STABLE = itemgetter(*STABLE_FIELDS)
_INSTANCE_ID = itemgetter("instance_id")
_ROUTES = itemgetter("routes")


def _all_well(workers: list[dict[str, Any]], verdict: Any) -> bool:
    """A check's whole-list verdict computed in C over every worker (`verdict(workers)`), or
    False when it cannot be (a key missing, an odd type): the check then walks the workers one
    by one for the exact violations. A fleet of ten thousand conforming workers is judged in
    milliseconds; a broken one is reported exactly as before."""
    try:
        return bool(verdict(workers))
    except (KeyError, TypeError, ValueError):
        return False


def _ids_well_formed(workers: list[dict[str, Any]]) -> bool:
    ids = list(map(_INSTANCE_ID, workers))
    return (
        all(map(int.__instancecheck__, ids))  # type: ignore[attr-defined]
        and not any(map(bool.__instancecheck__, ids))  # type: ignore[attr-defined]
        and (not ids or (min(ids) >= 0 and max(ids) <= MAX_U64))
        and len(set(map(_IDENTITY, workers))) == len(workers)
    )


def _no_nulls(workers: list[dict[str, Any]]) -> bool:
    """No value of any worker is null (so no optional field is)."""
    return not any(None in values for values in map(dict.values, workers))


def _routes_ascending(workers: list[dict[str, Any]]) -> bool:
    lists = list(map(_ROUTES, workers))
    if not all(map(list.__instancecheck__, lists)):  # type: ignore[attr-defined]
        return False
    known: dict[tuple[Any, ...], bool] = {}
    return all(_strictly_ascending_names(list(routes), known) for routes in set(map(tuple, lists)))


@check(contract.discovery.PROTOCOL_VERSION)
def protocol_version(body: Any) -> Findings:
    if not isinstance(body, dict):
        yield Violation("discovery body is not a JSON object", "(root)", "object", body)
        return
    version = body.get("protocol_version", MISSING)
    if not is_int(version) or version != PROTOCOL_VERSION:
        yield Violation(
            "unsupported discovery protocol version; the worker list must not be read",
            "protocol_version",
            PROTOCOL_VERSION,
            describe(version),
        )


DYNAMO_IDENTITY = frozenset({"namespace", "component", "endpoint", "instance_id"})


def foreign_listener(body: Any) -> str | None:
    """Why a `/v1/rl/workers` body is not the Dynamo RL listener's, or None when it may be.

    Another product serves the same path: the SGLang Model Gateway's RL control plane
    (`smg-project/smg`, `crates/protocols/src/rl.rs`) answers `{"protocol_version": 1,
    "workers": [{"id", "url", "engine", ...}], "total": N}` — the same protocol number, a
    different body. A client that trusted the number would read gateway ids as Dynamo workers."""
    if not isinstance(body, dict):
        return None
    workers = [w for w in workers_of(body) if w.keys().isdisjoint(DYNAMO_IDENTITY)]
    gateway_keys = {"id", "url", "engine", "capabilities", "health"}
    gateway_like = [w for w in workers if gateway_keys & set(w)]
    if not gateway_like and not ("total" in body and "namespace" not in body):
        return None
    product = (
        "the SGLang Model Gateway's worker list (workers carry id/url/engine, a top-level total)"
        if gateway_like or "total" in body
        else "another product's worker list"
    )
    return (
        f"GET /v1/rl/workers answered {product}, not Dynamo's RL listener: its workers carry "
        "no Dynamo endpoint identity (namespace, component, endpoint, instance_id), so none of "
        "them is administered"
    )


@check(
    "discovery.dynamo_listener",
    title="the discovery body is Dynamo's RL listener's, not another product's",
    spec="Check protocol_version before reading the worker list. In protocol version 1: "
    "`namespace`, `component`, `endpoint`, `instance_id`, `transport`, `request_plane_url`: "
    "Stable Dynamo endpoint identity",
    section=SECTION,
)
def dynamo_listener(body: Any) -> Findings:
    reason = foreign_listener(body)
    if reason is not None:
        observed = sorted(body) if isinstance(body, dict) else body
        yield Violation(reason, "(root)", "Dynamo RL listener body (namespace, workers)", observed)


def _strictly_ascending_names(routes: list[Any], known: dict[tuple[Any, ...], bool]) -> bool:
    """Whether `routes` are non-empty strings in strictly ascending order (so sorted and unique),
    decided in C: sorting mixed types or unhashable entries raises, and "" would sort first.
    `known` remembers the answer for each distinct list."""
    try:
        key = tuple(routes)
        found = known.get(key)
        if found is None:
            found = routes == sorted(set(routes)) and (not routes or _is_name(routes[0]))
            known[key] = found
        return found
    except TypeError:
        return False


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and value != ""


@check(
    "discovery.routes_well_formed",
    title="routes are non-empty strings, sorted and unique",
    spec="`routes`: Worker-advertised Dynamo administration routes (listener sorts and "
    "de-duplicates them).",
    section=SECTION,
)
def routes_well_formed(body: Any) -> Findings:
    workers = workers_of(body)
    if _all_well(workers, _routes_ascending):
        return
    well_formed: dict[tuple[Any, ...], bool] = {}  # workers mostly share their route lists
    for position, worker in enumerate(workers):
        routes = worker.get("routes", MISSING)
        if isinstance(routes, list) and _strictly_ascending_names(routes, well_formed):
            continue
        where = f"workers[{position}].routes"
        if not isinstance(routes, list):
            yield Violation(
                f"{where}: required array missing or not an array",
                where,
                "array of strings",
                describe(routes),
            )
            continue
        bad = [route for route in routes if not isinstance(route, str) or not route]
        if bad:
            yield Violation(
                f"{where}: entries must be non-empty strings", where, "non-empty strings", bad
            )
            continue
        counts = Counter(routes)
        if len(counts) != len(routes):
            dupes = sorted(route for route, count in counts.items() if count > 1)
            yield Violation(f"{where}: duplicated routes {dupes}", where, "unique routes", routes)
        if routes != sorted(routes):
            yield Violation(f"{where}: routes not sorted ascending", where, sorted(routes), routes)


@check(
    "discovery.request_plane_url",
    title="request_plane_url is dyn://{namespace}.{component}.{endpoint}",
    spec="`namespace`, `component`, `endpoint`, `instance_id`, `transport`, `request_plane_url`: "
    "Stable Dynamo endpoint identity",
    section=SECTION,
)
def request_plane_url(body: Any) -> Findings:
    for position, worker in enumerate(workers_of(body)):
        expected = (
            f"dyn://{worker.get('namespace')}.{worker.get('component')}.{worker.get('endpoint')}"
        )
        observed = worker.get("request_plane_url", MISSING)
        if observed != expected:
            yield Violation(
                f"workers[{position}].request_plane_url does not match the worker's "
                "namespace/component/endpoint",
                f"workers[{position}].request_plane_url",
                expected,
                describe(observed),
            )


@check(
    "discovery.instance_ids",
    title="instance_id is an exact unsigned 64-bit integer, unique per endpoint",
    spec="`instance_id`: Stable Dynamo endpoint identity; do not interpret list position as "
    "worker identity.",
    section=SECTION,
)
def instance_ids(body: Any) -> Findings:
    workers = workers_of(body)
    if _all_well(workers, _ids_well_formed):
        return
    seen: dict[tuple[Any, ...], int] = {}
    for position, worker in enumerate(workers):
        value = worker.get("instance_id", MISSING)
        if not (type(value) is int or is_int(value)) or not 0 <= value <= MAX_U64:
            where = f"workers[{position}].instance_id"
            hint = " (a float loses precision above 2^53)" if isinstance(value, float) else ""
            yield Violation(
                f"{where}: expected an exact unsigned 64-bit integer{hint}",
                where,
                "integer in [0, 2^64)",
                describe(value),
            )
            continue
        key = identity(worker)
        if key in seen:
            where = f"workers[{position}].instance_id"
            yield Violation(
                f"{where}: identity {key} already used by workers[{seen[key]}]",
                where,
                "unique (namespace, component, endpoint, instance_id)",
                value,
            )
        seen[key] = position


@check(
    "discovery.optional_fields",
    title="optional worker fields are absent, never null",
    spec="Optional fields such as model, system_url, admin_base_url, and world_size appear only "
    "when the worker provides them.",
    section=SECTION,
)
def optional_fields(body: Any) -> Findings:
    workers = workers_of(body)
    if _all_well(workers, _no_nulls):
        return
    for position, worker in enumerate(workers):
        for name in OPTIONAL_WORKER_FIELDS:
            if name in worker and worker[name] is None:
                yield Violation(
                    f"workers[{position}].{name} is null; absent expected",
                    f"workers[{position}].{name}",
                    "(absent) or a value",
                    None,
                )


@check(contract.discovery.ERROR_FAILS_CLOSED)
def error_fails_closed(body: Any) -> Findings:
    for position, worker in enumerate(workers_of(body)):
        if "error" not in worker:
            continue
        routes = worker.get("routes", MISSING)
        if routes != []:
            yield Violation(
                f"workers[{position}] reports error {worker['error']!r} yet lists routes",
                f"workers[{position}].routes",
                [],
                describe(routes),
            )
        for name in ("system_url", "admin_base_url", "world_size"):
            if name in worker:
                yield Violation(
                    f"workers[{position}] reports an error yet advertises {name}",
                    f"workers[{position}].{name}",
                    "(absent)",
                    worker[name],
                )


@check(
    "discovery.identity_stable",
    title="two reads agree worker by worker, by identity",
    level=Level.SHOULD,
    spec="Do not cache membership indefinitely or interpret list position as worker identity.",
    section=SECTION,
)
def identity_stable(first: Any, second: Any) -> Findings:
    first_workers, second_workers = workers_of(first), workers_of(second)
    if first_workers == second_workers:  # in C: the same workers read twice (a steady read)
        return
    before = {identity(worker): worker for worker in first_workers}
    after = {identity(worker): worker for worker in second_workers}
    if before and after and before.keys().isdisjoint(after):
        yield Violation(
            "no worker identity survives between two consecutive reads of a steady deployment",
            "workers[*].instance_id",
            sorted(map(str, before)),
            sorted(map(str, after)),
        )
        return
    if before == after:  # in C: nothing changed (the usual steady read)
        return
    # The keys of the smaller read, as `set(before) & set(after)` would name them.
    small, large = (after, before) if len(after) <= len(before) else (before, after)
    changed = [
        key
        for key in small
        if key in large and _stable_view(before[key]) != _stable_view(after[key])
    ]
    for key in sorted(changed, key=str):
        for name in STABLE_FIELDS:
            if before[key].get(name, MISSING) != after[key].get(name, MISSING):
                yield Violation(
                    f"worker {key}: {name} changed between two reads",
                    f"workers[{key}].{name}",
                    describe(before[key].get(name, MISSING)),
                    describe(after[key].get(name, MISSING)),
                )


def _stable_view(worker: dict[str, Any]) -> tuple[Any, ...]:
    try:
        return _STABLE(worker)
    except KeyError:
        return tuple(worker.get(name, MISSING) for name in STABLE_FIELDS)
