"""Which workers a control-plane test acts on, and in which order, is decided by identity, never
by list position: a listener may list the same workers in another order on every read, and every
test of a run must still act on the same workers, or what one test left on a worker (the
checkpoint it loaded) is met by the next test on another one. Every worker the run may mutate is
selected, and each is observed on its own where a generation can be pinned to it."""

from __future__ import annotations

import itertools

import pytest

from rl_conformance.checks import control
from rl_conformance.control.admin import AdminWorker
from rl_conformance.control.admin_steps import by_identity, select
from rl_conformance.control.each_worker import on_worker, pins, require_observed, unobserved
from rl_conformance.model.mutations import MutationPolicy
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Unobservable

ROUTES = ("pause_generation", "resume_generation", "update_weights_from_disk")
VLLM = Target(id="t", backend="vllm", kind="external", frontend_url="http://f", rl_url="http://r")


def worker(
    instance_id: int | None, namespace: str = "dynamo", routes: object = ROUTES
) -> AdminWorker:
    url = f"http://worker-{instance_id}:9"
    return AdminWorker(instance_id, url, routes, namespace=namespace)  # type: ignore[arg-type]


FLEET = [worker(9583817786700636893), worker(7587886443219045121), worker(12)]


@pytest.mark.parametrize("listed", list(itertools.permutations(FLEET)))
def test_every_order_of_one_fleet_selects_the_same_workers(listed: tuple[AdminWorker, ...]) -> None:
    chosen = select(VLLM, list(listed))
    assert chosen.pinned == worker(12)
    assert chosen.workers == (worker(12), worker(7587886443219045121), worker(9583817786700636893))
    assert pins(chosen) == chosen.workers and unobserved(chosen) == ()


def test_namespace_then_instance_id_as_the_real_listener_sorts() -> None:
    fleet = [worker(1, "ns-b"), worker(5, "ns-a"), worker(3, "ns-a")]
    assert [w.instance_id for w in by_identity(fleet)] == [3, 5, 1]


def test_only_the_workers_the_run_may_mutate_are_selected_whatever_their_place() -> None:
    policy = MutationPolicy(allowed=True, workers=frozenset({7587886443219045121}))
    for listed in itertools.permutations(FLEET):
        chosen = select(VLLM, list(listed), policy)
        assert chosen.workers == (worker(7587886443219045121),)
    read_only = MutationPolicy()
    assert select(VLLM, FLEET, read_only).pinned == worker(12)
    everyone = MutationPolicy(allowed=True)
    assert select(VLLM, FLEET, everyone).pinned == worker(12)


def test_discovered_workers_come_before_given_urls_and_unknown_identities_keep_their_order() -> (
    None
):
    given_a, given_b = worker(None, "", None), AdminWorker(None, "http://b:9", None)
    scraped = worker(1, "", None)
    assert by_identity([given_a, scraped, given_b, worker(99)]) == [
        worker(99),
        scraped,
        given_a,
        given_b,
    ]
    sglang = Target(id="s", backend="sglang", kind="external", frontend_url="http://f")
    chosen = select(sglang, [given_a, given_b])
    assert chosen.workers == (given_a, given_b) and chosen.pinned is None
    assert pins(chosen) == (None,) and unobserved(chosen) == (given_a, given_b)
    with pytest.raises(Unobservable, match="worker at http://b:9"):
        require_observed(chosen, "a pause")
    alone = select(sglang, [given_b])
    assert pins(alone) == (None,) and unobserved(alone) == ()
    require_observed(alone, "a pause")  # the one unpinned generation can only be its own


def test_a_worker_of_unknown_identity_beside_known_ones_is_named_unobserved() -> None:
    sglang = Target(id="s", backend="sglang", kind="external", frontend_url="http://f")
    given, scraped = AdminWorker(None, "http://b:9", None), worker(1, "", None)
    chosen = select(sglang, [given, scraped])
    assert pins(chosen) == (scraped,) and unobserved(chosen) == (given,)
    with pytest.raises(Unobservable, match=r"judged on worker 1"):
        require_observed(chosen, "a pause")


def test_a_failure_names_the_worker_it_was_observed_on() -> None:
    failed = control.pause_gates(3, True, 1.0)
    named = on_worker(failed, worker(7))
    assert named.violations[0].message.startswith("on worker 7: a generation pinned")
    assert on_worker(failed, None) == failed


def test_a_rounded_instance_id_still_sorts() -> None:
    rounded = AdminWorker(7.5e18, "http://w:9", ROUTES, namespace="dynamo")  # type: ignore[arg-type]
    assert by_identity([rounded, worker(3)]) == [worker(3), rounded]


def test_a_worker_listed_with_another_ones_instance_id_is_named_unobserved() -> None:
    first, twin = worker(5), AdminWorker(5, "http://twin:9", ROUTES, namespace="dynamo")
    chosen = select(VLLM, [twin, first])
    assert pins(chosen) == (chosen.workers[0],) and unobserved(chosen) == (chosen.workers[1],)
    with pytest.raises(Unobservable, match="same instance id"):
        require_observed(chosen, "a cache reset")
