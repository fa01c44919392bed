"""A refusal is judged by what it refuses, not by its shape: an update sent to a running worker
may be refused with Dynamo's handled error (HTTP 200, `status: "error"`) or with any 4xx of the
engine's own (lmdeploy answers 409); an update applied, a 5xx or no answer still fails. A cache
reset after a retract pause may be refused in any shape; one that answers success must have
reset."""

from __future__ import annotations

from typing import Any

import pytest

from rl_conformance.checks import held_requests, pause

ROUTE = "update_weights_from_disk"
PAUSE_FIRST = "Worker must be paused via pause_generation() before updating weights."


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, {"status": "error", "message": PAUSE_FIRST}),
        (409, {"detail": PAUSE_FIRST}),
        (400, {"error": "Bad Request", "message": PAUSE_FIRST}),
        (403, "Forbidden"),
        (422, None),
    ],
)
def test_any_refusal_of_an_unpaused_update_passes(status: int, body: Any) -> None:
    result = pause.unpaused_update_refused("vllm", ROUTE, status, body, "v1", "v2")
    assert result.passed, result.explain()


@pytest.mark.parametrize(
    ("status", "body", "reported", "named"),
    [
        (200, {"status": "ok"}, "v2", "applied to a worker that was not paused"),
        (500, {"error": "Handler error"}, "v1", "not refused cleanly (HTTP 500)"),
        (None, None, "v1", "not refused cleanly (HTTP None)"),
        (409, {"detail": PAUSE_FIRST}, "v2", "reports the version it carried"),
    ],
)
def test_an_update_applied_or_not_answered_cleanly_still_fails(
    status: int | None, body: Any, reported: str, named: str
) -> None:
    result = pause.unpaused_update_refused("vllm", ROUTE, status, body, reported, "v2")
    assert not result.passed
    assert named in result.explain()


WRAPPER_500 = (
    "Python callback failed: Exception: Unable to unregister endpoint instance from discovery. "
    "Check discovery service status"
)


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (500, {"message": WRAPPER_500}, "HTTP 500"),
        (400, "Cache not flushed because there are pending requests.", "HTTP 400"),
        (200, {"success": False, "message": "pending requests"}, "success false"),
    ],
)
def test_a_refused_flush_after_a_retract_pause_is_no_violation(
    status: int, body: Any, said: str
) -> None:
    """The cache reset "rejects active requests" and a trainer stays gated when it fails: a
    refusal (Dynamo 1.6.1's and 1.7's route wrapper answers 500 after a retract pause) is
    reported by the suite, never failed, even with the prefix still cached."""
    result = held_requests.flush_after_retract(status, body, 64, 64, "worker 1")
    assert result.passed, result.explain()
    refusal = held_requests.flush_refusal(status, body)
    assert refusal is not None and refusal.startswith(said)


def test_a_flush_that_answers_success_and_keeps_the_prefix_fails() -> None:
    result = held_requests.flush_after_retract(200, {"success": True}, 64, 48, "worker 1")
    assert not result.passed
    assert "answered success, but the cached prefix is still reused" in result.explain()
    assert held_requests.flush_refusal(200, {"success": True}) is None
