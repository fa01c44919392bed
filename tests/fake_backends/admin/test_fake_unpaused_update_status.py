"""`--unpaused-update-status 409`: a vLLM worker refuses a weight update while running with a
4xx of its own (FastAPI's `detail` shape, as lmdeploy answers) and applies nothing; paused, it
takes the update as before."""

from __future__ import annotations

import httpx
import pytest

from fake_backends import FakeDeployment
from fake_backends.admin.vllm import PAUSE_FIRST


def test_an_unpaused_update_is_refused_with_the_status_given() -> None:
    with FakeDeployment("vllm", workers=1, unpaused_update_status=409) as fleet:
        (worker,) = fleet.workers
        engine = worker["system_url"] + "/engine/"
        body = {"model_path": "/checkpoints/a"}
        with httpx.Client(trust_env=False, timeout=10) as http:
            refused = http.post(engine + "update_weights_from_disk", json=body)
            assert (refused.status_code, refused.json()) == (409, {"detail": PAUSE_FIRST})
            assert fleet.state.workers[0].weights_tag == fleet.assembly.options.initial_weights
            assert http.post(engine + "pause_generation", json={}).json()["status"] == "ok"
            applied = http.post(engine + "update_weights_from_disk", json=body)
            assert (applied.status_code, applied.json()["status"]) == (200, "ok")


@pytest.mark.parametrize("status", [500, 302, 0])
def test_a_status_that_is_not_a_refusal_is_refused_before_anything_starts(status: int) -> None:
    with pytest.raises(ValueError, match=f"must be 200 or a 4xx, not {status}"):
        FakeDeployment("vllm", unpaused_update_status=status)
