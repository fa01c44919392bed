"""After a resume, a paused worker that left routing rejoins a moment later; a generation sent in
between is answered 503 and says nothing about the refresh. Where the frontend's routing is not
observable (Dynamo 1.7's `/health` lists no instances), the wait is on a one-token generation
alone, so the test after the resume judges a worker that serves again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from rl_conformance.control import admin_steps


def probes(monkeypatch: pytest.MonkeyPatch, statuses: list[int]) -> list[int]:
    """The statuses the readiness probe answers in turn; returns the list of those sent."""
    sent: list[int] = []

    def answer(*_: Any, **__: Any) -> SimpleNamespace:
        sent.append(statuses[min(len(sent), len(statuses) - 1)])
        return SimpleNamespace(status=sent[-1])

    monkeypatch.setattr(admin_steps, "pinned_generation", answer)
    monkeypatch.setattr(admin_steps.time, "sleep", lambda _: None)
    return sent


def test_unobservable_routing_waits_for_a_generation_the_worker_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent = probes(monkeypatch, [503, 503, 200])
    monkeypatch.setattr(
        admin_steps, "routed_now", lambda *_: pytest.fail("routing is not observable")
    )
    admin_steps.await_rejoin(SimpleNamespace(client=None), SimpleNamespace(), None)
    assert sent == [503, 503, 200]


def test_a_frontend_that_routed_to_none_before_is_not_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent = probes(monkeypatch, [503])
    admin_steps.await_rejoin(SimpleNamespace(client=None), SimpleNamespace(), set())
    assert sent == []


def test_observable_routing_waits_for_the_instances_then_the_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent = probes(monkeypatch, [503, 200])
    routed = iter([set(), {1}, {1}, {1}])
    monkeypatch.setattr(admin_steps, "routed_now", lambda *_: next(routed))
    admin_steps.await_rejoin(SimpleNamespace(client=None), SimpleNamespace(), {1})
    assert sent == [503, 200]
