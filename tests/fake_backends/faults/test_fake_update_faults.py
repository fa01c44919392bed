"""Every fault of a weight update manifests: each test shows the faulty and the clean behaviour.

The ``@shows`` registry is shared with ``test_fake_faults``, whose completeness check
imports this module.
"""

from __future__ import annotations

import json
import threading

import httpx
from fake_backend_helpers import PROMPT, admin, faulted, greedy, ids, shows

from fake_backends.deployment.assembly import FakeDeployment

# -- worker administration ---------------------------------------------------------------


@shows("weight_version_unchanged")
def test_weight_version_unchanged(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    before = ids(greedy(client, dep))
    admin(client, base, "pause_generation")
    with faulted(dep, "weight_version_unchanged"):
        reply = admin(
            client, base, "update_weights_from_disk", {"model_path": "/c", "weight_version": "v9"}
        )
        assert reply == {"status": "ok", "version": "v9", "version_declared": True}
        assert admin(client, base, "get_weight_version") == {
            "status": "ok",
            "version": None,
            "version_declared": False,
        }
        admin(client, base, "resume_generation")
        after = greedy(client, dep)
    assert ids(after) != before  # the weights did change
    assert after["nvext"]["engine_data"]["weight_version"] is None


@shows("update_keeps_old_weights")
def test_update_keeps_old_weights(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    before = ids(greedy(client, dep))
    admin(client, base, "pause_generation")
    with faulted(dep, "update_keeps_old_weights"):
        update = {"model_path": "/c", "weight_version": "v2"}
        assert admin(client, base, "update_weights_from_disk", update)["status"] == "ok"
        assert admin(client, base, "get_weight_version")["version"] == "v2"
        admin(client, base, "resume_generation")
        after = greedy(client, dep)
    assert ids(after) == before
    assert after["nvext"]["engine_data"]["weight_version"] == "v2"


@shows("update_serves_a_mix")
def test_update_serves_a_mix(client: httpx.Client, dep: FakeDeployment) -> None:
    """The update answers success and the output changes, but the worker serves neither the
    old weights nor the checkpoint sent: not what a fresh start on that checkpoint serves."""
    base = dep.workers[0]["system_url"]
    before = ids(greedy(client, dep))
    with FakeDeployment("vllm", workers=1, initial_model_path="/c") as cold:
        checkpoint = ids(greedy(client, cold))
    admin(client, base, "pause_generation")
    with faulted(dep, "update_serves_a_mix"):
        update = {"model_path": "/c", "weight_version": "v2"}
        assert admin(client, base, "update_weights_from_disk", update)["status"] == "ok"
        assert admin(client, base, "get_weight_version")["version"] == "v2"
        admin(client, base, "resume_generation")
        after = greedy(client, dep)
    assert ids(after) != before and ids(after) != checkpoint
    assert after["nvext"]["engine_data"]["weight_version"] == "v2"
    # Faithful, the same update serves the checkpoint (from a fresh worker's old weights).
    with FakeDeployment("vllm", workers=1) as clean:
        clean_base = clean.workers[0]["system_url"]
        admin(client, clean_base, "pause_generation")
        admin(client, clean_base, "update_weights_from_disk", {"model_path": "/c"})
        admin(client, clean_base, "resume_generation")
        assert ids(greedy(client, clean)) == checkpoint


@shows("logprobs_nan_after_update")
def test_logprobs_nan_after_update(client: httpx.Client, dep: FakeDeployment) -> None:
    """Log probabilities are finite until the worker loads new weights, NaN after; the ids stay
    the checkpoint's."""
    base = dep.workers[0]["system_url"]
    with faulted(dep, "logprobs_nan_after_update"):
        before = greedy(client, dep, logprobs=0)
        assert all(value == value for value in before["choices"][0]["logprobs"]["token_logprobs"])
        admin(client, base, "pause_generation")
        admin(client, base, "update_weights_from_disk", {"model_path": "/c"})
        admin(client, base, "resume_generation")
        after = greedy(client, dep, logprobs=0)
    selected = after["choices"][0]["logprobs"]["token_logprobs"]
    assert selected and all(value != value for value in selected)
    with FakeDeployment("vllm", workers=1, initial_model_path="/c") as cold:
        assert ids(after) == ids(greedy(client, cold))


def logprobs_across_update(client: httpx.Client, dep: FakeDeployment) -> list[float]:
    """The selected logprobs of a long stream held by a keep pause while its worker loads new
    weights, then resumed."""
    base = dep.workers[0]["system_url"]
    values: list[float] = []
    body = {
        "model": "toy",
        "prompt": PROMPT,
        "max_tokens": 200,
        "ignore_eos": True,
        "stream": True,
        "logprobs": 0,
        "nvext": {"backend_instance_id": dep.workers[0]["instance_id"]},
    }
    started = threading.Event()

    def read() -> None:
        with client.stream("POST", f"{dep.frontend_url}/v1/completions", json=body) as reply:
            for line in reply.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    choices = json.loads(line[6:]).get("choices") or [{}]
                    values.extend((choices[0].get("logprobs") or {}).get("token_logprobs", []))
                    started.set()

    reader = threading.Thread(target=read)
    reader.start()
    assert started.wait(10)
    admin(client, base, "pause_generation", {"mode": "keep"})
    admin(client, base, "update_weights_from_disk", {"model_path": "/c"})
    admin(client, base, "resume_generation")
    reader.join(20)
    assert len(values) == 200
    return values


@shows("logprobs_nan_across_update")
def test_logprobs_nan_across_update(client: httpx.Client, dep: FakeDeployment) -> None:
    """Finite throughout, faithfully; under the fault, finite up to the update and NaN after."""
    assert all(value == value for value in logprobs_across_update(client, dep))
    with faulted(dep, "logprobs_nan_across_update"):
        values = logprobs_across_update(client, dep)
    first_nan = next(at for at, value in enumerate(values) if value != value)
    assert first_nan > 0 and all(value != value for value in values[first_nan:])
