"""Checks of the RL discovery listener's `GET /v1/rl/workers` body (protocol version 1)."""

from __future__ import annotations

from typing import Any

from .base import MISSING, Findings, Level, Violation, check, describe, get_path, is_int

SECTION = "Discover Workers Safely"
PROTOCOL_VERSION = 1
OPTIONAL_WORKER_FIELDS = ("system_url", "admin_base_url", "model", "world_size", "error")
MAX_U64 = 2**64 - 1


def workers_of(body: Any) -> list[dict[str, Any]]:
    """The worker objects of a body whose protocol version has already been checked."""
    workers = get_path(body, "workers")
    if not isinstance(workers, list):
        return []
    return [worker for worker in workers if isinstance(worker, dict)]


def identity(worker: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """A worker's identity: never its position in the list."""
    return (
        worker.get("namespace"),
        worker.get("component"),
        worker.get("endpoint"),
        worker.get("instance_id"),
    )


@check(
    "discovery.protocol_version",
    title="protocol_version is 1 before the worker list is read",
    spec="Check protocol_version before reading the worker list.",
    section=SECTION,
)
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


DYNAMO_IDENTITY = ("namespace", "component", "endpoint", "instance_id")


def foreign_listener(body: Any) -> str | None:
    """Why a `/v1/rl/workers` body is not the Dynamo RL listener's, or None when it may be.

    Another product serves the same path: the SGLang Model Gateway's RL control plane
    (`smg-project/smg`, `crates/protocols/src/rl.rs`) answers `{"protocol_version": 1,
    "workers": [{"id", "url", "engine", ...}], "total": N}` — the same protocol number, a
    different body. A client that trusted the number would read gateway ids as Dynamo workers."""
    if not isinstance(body, dict):
        return None
    workers = [w for w in workers_of(body) if not any(key in w for key in DYNAMO_IDENTITY)]
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


@check(
    "discovery.routes_well_formed",
    title="routes are non-empty strings, sorted and unique",
    spec="`routes`: Worker-advertised Dynamo administration routes (listener sorts and "
    "de-duplicates them).",
    section=SECTION,
)
def routes_well_formed(body: Any) -> Findings:
    for position, worker in enumerate(workers_of(body)):
        where = f"workers[{position}].routes"
        routes = worker.get("routes", MISSING)
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
        if len(set(routes)) != len(routes):
            dupes = sorted({route for route in routes if routes.count(route) > 1})
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
        expected = "dyn://{}.{}.{}".format(
            worker.get("namespace"), worker.get("component"), worker.get("endpoint")
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
    seen: dict[tuple[Any, ...], int] = {}
    for position, worker in enumerate(workers_of(body)):
        value = worker.get("instance_id", MISSING)
        where = f"workers[{position}].instance_id"
        if not is_int(value) or not 0 <= value <= MAX_U64:
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
    for position, worker in enumerate(workers_of(body)):
        for name in OPTIONAL_WORKER_FIELDS:
            if name in worker and worker[name] is None:
                yield Violation(
                    f"workers[{position}].{name} is null; absent expected",
                    f"workers[{position}].{name}",
                    "(absent) or a value",
                    None,
                )


@check(
    "discovery.error_fails_closed",
    title="a worker with a probe error advertises no routes and no admin URL",
    spec="`error`: Probe failure; fail closed when a required worker or route is unavailable",
    section=SECTION,
)
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
    before = {identity(worker): worker for worker in workers_of(first)}
    after = {identity(worker): worker for worker in workers_of(second)}
    if before and after and not set(before) & set(after):
        yield Violation(
            "no worker identity survives between two consecutive reads of a steady deployment",
            "workers[*].instance_id",
            sorted(map(str, before)),
            sorted(map(str, after)),
        )
        return
    for key in sorted(set(before) & set(after), key=str):
        for name in ("transport", "request_plane_url", "system_url", "model", "routes"):
            if before[key].get(name, MISSING) != after[key].get(name, MISSING):
                yield Violation(
                    f"worker {key}: {name} changed between two reads",
                    f"workers[{key}].{name}",
                    describe(before[key].get(name, MISSING)),
                    describe(after[key].get(name, MISSING)),
                )
