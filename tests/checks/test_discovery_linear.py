"""The discovery checks, written to run in time linear in the number of workers (one pass, a
dict or a Counter where a pairwise search would be quadratic, the answer for a route list
remembered), still say exactly what their straightforward reading says: the reference
implementations below give the same violations on generated worker lists, well-formed or not.
Their speed is measured by `benchmarks/scale.py`, not here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rl_conformance.checks import discovery
from rl_conformance.checks.base import MISSING, Violation, describe, is_int

FIELDS = ("transport", "request_plane_url", "system_url", "model", "routes")


def reference_routes(body: Any) -> Iterator[Violation]:
    for position, worker in enumerate(discovery.workers_of(body)):
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


def reference_instance_ids(body: Any) -> Iterator[Violation]:
    seen: dict[tuple[Any, ...], int] = {}
    for position, worker in enumerate(discovery.workers_of(body)):
        value = worker.get("instance_id", MISSING)
        where = f"workers[{position}].instance_id"
        if not is_int(value) or not 0 <= value <= discovery.MAX_U64:
            hint = " (a float loses precision above 2^53)" if isinstance(value, float) else ""
            yield Violation(
                f"{where}: expected an exact unsigned 64-bit integer{hint}",
                where,
                "integer in [0, 2^64)",
                describe(value),
            )
            continue
        key = tuple(worker.get(k) for k in ("namespace", "component", "endpoint", "instance_id"))
        if key in seen:
            yield Violation(
                f"{where}: identity {key} already used by workers[{seen[key]}]",
                where,
                "unique (namespace, component, endpoint, instance_id)",
                value,
            )
        seen[key] = position


def reference_identity_stable(first: Any, second: Any) -> Iterator[Violation]:
    def identity(worker: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(worker.get(k) for k in ("namespace", "component", "endpoint", "instance_id"))

    before = {identity(worker): worker for worker in discovery.workers_of(first)}
    after = {identity(worker): worker for worker in discovery.workers_of(second)}
    if before and after and not set(before) & set(after):
        yield Violation(
            "no worker identity survives between two consecutive reads of a steady deployment",
            "workers[*].instance_id",
            sorted(map(str, before)),
            sorted(map(str, after)),
        )
        return
    for key in sorted(set(before) & set(after), key=str):
        for name in FIELDS:
            if before[key].get(name, MISSING) != after[key].get(name, MISSING):
                yield Violation(
                    f"worker {key}: {name} changed between two reads",
                    f"workers[{key}].{name}",
                    describe(before[key].get(name, MISSING)),
                    describe(after[key].get(name, MISSING)),
                )


def reference_gateway(body: Any) -> bool:
    identity_keys = ("namespace", "component", "endpoint", "instance_id")
    workers = [w for w in discovery.workers_of(body) if not any(key in w for key in identity_keys)]
    return bool(workers)


ROUTE = st.sampled_from(["a", "b", "c/d", "", 1, None, True, ["a"], {"a": 1}])
WORKER = st.fixed_dictionaries(
    {
        "namespace": st.sampled_from(["dynamo", "rl"]),
        "instance_id": st.one_of(
            st.integers(min_value=0, max_value=3),
            st.sampled_from([2**64 - 1, 2**64, -1, 1.0, True, "7"]),
        ),
    },
    optional={
        "component": st.sampled_from(["backend", "prefill"]),
        "endpoint": st.just("rl"),
        "routes": st.one_of(st.lists(ROUTE, max_size=4), st.sampled_from([None, "a", {}])),
        "transport": st.sampled_from([{"tcp": "h:1"}, {"tcp": "h:2"}, {"nats_tcp": "x"}]),
        "request_plane_url": st.sampled_from(["dyn://dynamo.backend.rl", "dyn://x"]),
        "system_url": st.sampled_from(["http://h:1", None]),
        "model": st.sampled_from(["toy", "other", None]),
        "id": st.just("gateway-worker"),
    },
)
BODY = st.builds(
    lambda workers: {"protocol_version": 1, "namespace": "dynamo", "workers": workers},
    st.lists(st.one_of(WORKER, st.sampled_from([None, 3, "w"])), max_size=6),
)


@settings(max_examples=150)
@given(first=BODY, second=BODY)
def test_the_linear_checks_say_what_the_straightforward_reading_says(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    for body in (first, second):
        assert discovery.routes_well_formed(body).violations == tuple(reference_routes(body))
        assert discovery.instance_ids(body).violations == tuple(reference_instance_ids(body))
        assert (discovery.foreign_listener(body) is None) == (
            not reference_gateway(body) and not ("total" in body and "namespace" not in body)
        )
    assert discovery.identity_stable(first, second).violations == tuple(
        reference_identity_stable(first, second)
    )
    assert discovery.identity_stable(first, first).passed


def test_routes_of_mixed_types_are_reported_not_raised() -> None:
    body = {"workers": [{"routes": ["b", 1]}, {"routes": [["a"], ["a"]]}, {"routes": ["b", "a"]}]}
    messages = [v.message for v in discovery.routes_well_formed(body).violations]
    assert messages == [
        "workers[0].routes: entries must be non-empty strings",
        "workers[1].routes: entries must be non-empty strings",
        "workers[2].routes: routes not sorted ascending",
    ]
