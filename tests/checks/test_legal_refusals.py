"""A refusal is judged by what it refuses, not by its shape: an update sent to a running worker
may be refused with Dynamo's handled error (HTTP 200, `status: "error"`) or with any 4xx of the
engine's own (lmdeploy answers 409); an update applied, a 5xx or no answer still fails."""

from __future__ import annotations

from typing import Any

import pytest

from rl_conformance.checks import pause

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
