"""The weight version a vLLM worker reports: the last one declared to it, and nothing once its
engine died and was restarted on its starting weights (a stream the crash cut ends in an error
event), the same in a response's engine_data, and SGLang's per-token version spans split where
the version changed; each fault breaks one rule of these.

The ``@shows`` registry is shared with ``test_fake_faults``, whose completeness check imports
this module.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fake_backend_helpers import PROMPT, admin, completions, faulted, shows

from fake_backends.deployment.assembly import FakeDeployment
from fake_backends.frontend.sglang_native import SglangEvents, parse_sglang_request


@pytest.fixture
def dep() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm", workers=1) as deployment:
        yield deployment


def stored(client: httpx.Client, base: str) -> Any:
    return admin(client, base, "get_weight_version")


def declare_null(client: httpx.Client, dep: FakeDeployment) -> Any:
    base = dep.workers[0]["system_url"]
    admin(client, base, "set_weight_version", {"weight_version": "v1"})
    admin(client, base, "set_weight_version", {"weight_version": None})
    return stored(client, base)


def update_unversioned(client: httpx.Client, dep: FakeDeployment) -> tuple[Any, Any]:
    base = dep.workers[0]["system_url"]
    admin(client, base, "set_weight_version", {"weight_version": "v1"})
    admin(client, base, "pause_generation", {"mode": "keep"})
    reply = admin(client, base, "update_weights_from_disk", {"model_path": "/ckpt/a"})
    admin(client, base, "resume_generation")
    return reply, stored(client, base)


@shows("null_version_undeclared")
def test_null_version_undeclared(client: httpx.Client, dep: FakeDeployment) -> None:
    assert declare_null(client, dep) == {"status": "ok", "version": None, "version_declared": True}
    with faulted(dep, "null_version_undeclared"):
        assert declare_null(client, dep)["version"] == "v1"


@shows("unversioned_update_declares")
def test_unversioned_update_declares(client: httpx.Client, dep: FakeDeployment) -> None:
    reply, after = update_unversioned(client, dep)
    assert reply == {"status": "ok", "version": "unknown", "version_declared": False}
    assert after == {"status": "ok", "version": "v1", "version_declared": True}
    with faulted(dep, "unversioned_update_declares"):
        reply, after = update_unversioned(client, dep)
    assert reply["version_declared"] is False and after["version"] == "unknown"


def crash(client: httpx.Client, dep: FakeDeployment) -> Any:
    instance_id = dep.workers[0]["instance_id"]
    reply = client.post(f"{dep.control_url}/engine_crash", json={"instance_id": instance_id})
    assert reply.status_code == 200, reply.text
    return reply.json()


def crossed_stream(client: httpx.Client, dep: FakeDeployment) -> list[str]:
    """The data lines of a long stream whose engine is killed once it has started."""
    lines: list[str] = []
    body = {"model": "toy", "prompt": PROMPT, "max_tokens": 400, "ignore_eos": True, "stream": True}
    started = threading.Event()

    def read() -> None:
        with client.stream("POST", f"{dep.frontend_url}/v1/completions", json=body) as reply:
            for line in reply.iter_lines():
                if line.startswith("data: "):
                    lines.append(line[6:])
                    started.set()

    reader = threading.Thread(target=read)
    reader.start()
    assert started.wait(10)
    crash(client, dep)
    reader.join(10)
    return lines


def test_a_crash_fails_the_stream_and_restarts_on_the_starting_weights(
    client: httpx.Client, dep: FakeDeployment
) -> None:
    base = dep.workers[0]["system_url"]
    admin(client, base, "set_weight_version", {"weight_version": "v1"})
    lines = crossed_stream(client, dep)
    assert "error" in json.loads(lines[-1]) and "[DONE]" not in lines
    assert admin(client, base, "get_weight_version")["version_declared"] is False


@shows("recovered_worker_keeps_version")
def test_recovered_worker_keeps_version(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    admin(client, base, "set_weight_version", {"weight_version": "v1"})
    with faulted(dep, "recovered_worker_keeps_version"):
        crash(client, dep)
    assert admin(client, base, "get_weight_version")["version"] == "v1"


@shows("crashed_stream_ends_clean")
def test_crashed_stream_ends_clean(client: httpx.Client, dep: FakeDeployment) -> None:
    with faulted(dep, "crashed_stream_ends_clean"):
        lines = crossed_stream(client, dep)
    assert lines[-1] == "[DONE]" and not any('"error"' in line for line in lines)


@shows("weight_version_misreported")
def test_weight_version_misreported(client: httpx.Client, vllm: FakeDeployment) -> None:
    fields = {"extra_fields": ["completion_token_ids", "engine_data"]}
    clean = completions(client, vllm, prompt=PROMPT, max_tokens=2, nvext=fields).json()
    with faulted(vllm, "weight_version_misreported"):
        body = completions(client, vllm, prompt=PROMPT, max_tokens=2, nvext=fields).json()
    assert body["nvext"]["engine_data"]["weight_version"] == "never-applied-weights"
    assert clean["nvext"]["engine_data"]["weight_version"] != "never-applied-weights"


@shows("weight_versions_span_collapsed")
def test_weight_versions_span_collapsed(sglang: FakeDeployment) -> None:
    """Two tokens released under `old`, two after the worker moved to `new`: the faithful spans
    split there, the faulty ones give all four to `new`."""
    state = sglang.state
    worker = state.workers[0]
    request = parse_sglang_request({"input_ids": PROMPT, "stream": True})

    def spans() -> list[dict[str, Any]]:
        events = SglangEvents(state, worker, request, cached_tokens=0)
        saved = worker.version, worker.version_declared
        try:
            for version in ("old", "old", "new", "new"):
                worker.version, worker.version_declared = version, True
                events._versions.append(events._current_version())
            return events.event(4, final=False)["meta_info"]["weight_versions"]
        finally:
            worker.version, worker.version_declared = saved

    assert spans() == [
        {"version": "old", "start": 0, "end": 2},
        {"version": "new", "start": 2, "end": 4},
    ]
    with faulted(sglang, "weight_versions_span_collapsed"):
        assert spans() == [{"version": "new", "start": 0, "end": 4}]


@shows("recovered_samples_keep_version")
def test_recovered_samples_keep_version(client: httpx.Client, dep: FakeDeployment) -> None:
    base = dep.workers[0]["system_url"]
    fields = {"extra_fields": ["engine_data"]}

    def named() -> Any:
        body = completions(client, dep, prompt=PROMPT, max_tokens=2, nvext=fields).json()
        return body["nvext"]["engine_data"].get("weight_version")

    admin(client, base, "set_weight_version", {"weight_version": "v1"})
    crash(client, dep)
    assert named() != "v1"
    admin(client, base, "set_weight_version", {"weight_version": "v1"})
    with faulted(dep, "recovered_samples_keep_version"):
        crash(client, dep)
        assert named() == "v1"
    assert admin(client, base, "get_weight_version")["version_declared"] is False
    admin(client, base, "set_weight_version", {"weight_version": "v2"})
    assert named() == "v2"  # a new declaration ends the stale stamp
