"""`--initial-model-path` (a deployment option, not a fault): every worker starts on a checkpoint,
with the weights an `update_weights_from_disk` of that path gives, so a fresh start on a checkpoint
and an update to it serve the same policy (the cold-start reference of
`refresh.served_policy_verified`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_backend_helpers import admin

from fake_backends import READY_FIELDS, read_ready_line
from fake_backends.deployment.assembly import FakeDeployment

REPO = Path(__file__).resolve().parents[3]
PROBE = list(range(300, 324))
# How each backend's Python-worker family loads a checkpoint from disk.
UPDATE = {
    "vllm": ("pause_generation", "update_weights_from_disk", "resume_generation"),
    "sglang": (None, "control/update_weights_from_disk", None),
}


def probe(client: httpx.Client, fleet: FakeDeployment, index: int = 0) -> dict[str, Any]:
    """The served-policy probe, pinned: greedy ids, their logprobs and the prompt's."""
    body = {
        "model": fleet.model,
        "prompt": PROBE,
        "max_tokens": 12,
        "temperature": 0,
        "ignore_eos": True,
        "logprobs": 2,
        "prompt_logprobs": 0,
        "nvext": {
            "extra_fields": ["completion_token_ids", "prompt_logprobs"],
            "backend_instance_id": fleet.workers[index]["instance_id"],
        },
    }
    reply = client.post(f"{fleet.frontend_url}/v1/completions", json=body)
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    return {
        "ids": answer["nvext"]["completion_token_ids"],
        "logprobs": answer["choices"][0]["logprobs"],
        "prompt": answer["nvext"]["prompt_logprobs"],
    }


def update(client: httpx.Client, fleet: FakeDeployment, path: str, index: int = 0) -> None:
    base = fleet.workers[index]["system_url"]
    pause, load, resume = UPDATE[fleet.backend]
    if pause:
        admin(client, base, pause)
    admin(client, base, load, {"model_path": path, "weight_version": "v-next"})
    if resume:
        admin(client, base, resume)


@pytest.mark.parametrize("backend", sorted(UPDATE))
def test_a_start_on_a_checkpoint_serves_what_an_update_to_it_serves(
    client: httpx.Client, backend: str
) -> None:
    with FakeDeployment(backend, workers=1, initial_model_path="/ckpt/b") as cold:
        started = probe(client, cold)
    with FakeDeployment(backend, workers=2) as fleet:
        initial = probe(client, fleet)
        update(client, fleet, "/ckpt/b")
        updated = probe(client, fleet)
        untouched = probe(client, fleet, index=1)
    assert updated == started
    assert initial != started and untouched == initial  # the option changes the weights, only


def test_every_worker_starts_on_the_checkpoint(client: httpx.Client) -> None:
    with FakeDeployment("vllm", workers=2, initial_model_path="/ckpt/b") as fleet:
        assert probe(client, fleet, 0) == probe(client, fleet, 1)
        assert {worker.weights_tag for worker in fleet.state.workers} == {"path:/ckpt/b"}


def test_an_empty_path_is_refused_before_anything_is_bound() -> None:
    with pytest.raises(ValueError, match="initial model path must not be empty"):
        FakeDeployment("vllm", initial_model_path="")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def test_the_command_line_option_keeps_the_ready_line(client: httpx.Client) -> None:
    with FakeDeployment("vllm", workers=1, initial_model_path="/ckpt/b") as cold:
        expected = probe(client, cold)["ids"]
    command = [sys.executable, "-m", "fake_backends", "vllm", "--workers", "1"]
    proc = subprocess.Popen(
        [*command, "--initial-model-path", "/ckpt/b", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        info = read_ready_line(proc.stdout, timeout=20)
        assert list(info) == list(READY_FIELDS)
        body = {
            "model": info["model"],
            "prompt": PROBE,
            "max_tokens": 12,
            "temperature": 0,
            "ignore_eos": True,
            "nvext": {"extra_fields": ["completion_token_ids"]},
        }
        reply = client.post(f"{info['frontend']}/v1/completions", json=body).json()
        assert reply["nvext"]["completion_token_ids"] == expected
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_command_line_refuses_an_empty_path() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "fake_backends", "vllm", "--initial-model-path", ""],
        capture_output=True,
        env=_env(),
        cwd=REPO,
        timeout=30,
    )
    assert out.returncode == 2 and out.stdout == b""
    assert b"initial model path must not be empty" in out.stderr
