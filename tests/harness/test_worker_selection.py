"""Which worker a control-plane test acts on is decided by identity, never by list position: a
listener may list the same workers in another order on every read, and every test of a run must
still act on (and pin its generations to) the same worker, or what one test left on a worker (the
checkpoint it loaded) is met by the next test on another one."""

from __future__ import annotations

import itertools

import pytest

from rl_conformance.control.admin import AdminWorker, MutationPolicy
from rl_conformance.control.admin_steps import by_identity, select
from rl_conformance.model.target import Target

ROUTES = ("pause_generation", "resume_generation", "update_weights_from_disk")
VLLM = Target(id="t", backend="vllm", kind="external", frontend_url="http://f", rl_url="http://r")


def worker(
    instance_id: int | None, namespace: str = "dynamo", routes: object = ROUTES
) -> AdminWorker:
    url = f"http://worker-{instance_id}:9"
    return AdminWorker(instance_id, url, routes, namespace=namespace)  # type: ignore[arg-type]


FLEET = [worker(9583817786700636893), worker(7587886443219045121), worker(12)]


@pytest.mark.parametrize("listed", list(itertools.permutations(FLEET)))
def test_every_order_of_one_fleet_selects_the_same_worker(listed: tuple[AdminWorker, ...]) -> None:
    chosen = select(VLLM, list(listed))
    assert chosen.pinned == worker(12)
    assert chosen.workers == (worker(12),)


def test_namespace_then_instance_id_as_the_real_listener_sorts() -> None:
    fleet = [worker(1, "ns-b"), worker(5, "ns-a"), worker(3, "ns-a")]
    assert [w.instance_id for w in by_identity(fleet)] == [3, 5, 1]


def test_a_worker_the_run_may_mutate_is_preferred_whatever_its_place() -> None:
    policy = MutationPolicy(allowed=True, workers=frozenset({7587886443219045121}))
    for listed in itertools.permutations(FLEET):
        assert select(VLLM, list(listed), policy).pinned == worker(7587886443219045121)
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


def test_a_rounded_instance_id_still_sorts() -> None:
    rounded = AdminWorker(7.5e18, "http://w:9", ROUTES, namespace="dynamo")  # type: ignore[arg-type]
    assert by_identity([rounded, worker(3)]) == [worker(3), rounded]
