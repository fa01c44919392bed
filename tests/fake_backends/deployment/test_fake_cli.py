"""The command line: the ready line from a real subprocess, clean stop, fault options."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from fake_backends import READY_FIELDS, read_ready_line
from fake_backends.faults.deployment import FAULT_NAMES

REPO = Path(__file__).resolve().parents[3]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "fake_backends", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        cwd=REPO,
    )


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_ready_line_and_clean_stop(stop_signal: signal.Signals) -> None:
    proc = _spawn("vllm", "--workers", "2", "--fault", "done_missing", "--fault", "nan_logprob")
    try:
        assert proc.stdout is not None
        info = read_ready_line(proc.stdout, timeout=20)
        assert list(info) == list(READY_FIELDS)
        assert info["backend"] == "vllm" and info["model"] == "toy" and info["pid"] == proc.pid
        assert info["faults"] == ["done_missing", "nan_logprob"]
        assert len(info["workers"]) == 2 and info["workers"][0]["instance_id"] > 2**53
        for url in (
            info["frontend"],
            info["rl"],
            info["control"],
            info["workers"][0]["system_url"],
        ):
            assert url.startswith("http://127.0.0.1:")
        with httpx.Client(timeout=10) as client:
            assert client.get(info["frontend"] + "/live").status_code == 200
            listed = client.get(info["rl"] + "/v1/rl/workers").json()["workers"]
            assert {w["instance_id"] for w in listed} == {w["instance_id"] for w in info["workers"]}
            assert (
                client.get(info["workers"][1]["system_url"] + "/health").json()["status"] == "ready"
            )
            assert client.get(info["control"] + "/faults").json()["faults"] == info["faults"]
            switched = client.post(
                info["control"] + "/faults", json={"faults": ["protocol_version_2"]}
            )
            assert switched.json() == {"faults": ["protocol_version_2"]}
            assert client.get(info["rl"] + "/v1/rl/workers").json()["protocol_version"] == 2
            refused = client.post(info["control"] + "/faults", json={"faults": ["bogus"]})
            assert refused.status_code == 400 and "bogus" in refused.json()["error"]
        proc.send_signal(stop_signal)
        assert proc.wait(timeout=15) == 0
        assert proc.stdout.read() == b""  # exactly one line on stdout
        with pytest.raises(httpx.ConnectError):
            httpx.get(info["frontend"] + "/live", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_list_faults() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "fake_backends", "--list-faults"],
        capture_output=True,
        env=_env(),
        cwd=REPO,
        check=True,
    )
    lines = out.stdout.decode().splitlines()
    assert [line.split("\t")[0] for line in lines] == list(FAULT_NAMES)
    assert all(len(line.split("\t")) == 2 and line.split("\t")[1] for line in lines)


def test_unknown_fault_is_a_clear_error() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "fake_backends", "vllm", "--fault", "nope"],
        capture_output=True,
        env=_env(),
        cwd=REPO,
    )
    assert out.returncode == 2 and out.stdout == b""
    err = out.stderr.decode()
    assert "nope" in err and "done_missing" in err


def _spawn_env(args: list[str], **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "fake_backends", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**_env(), **env},
        cwd=REPO,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_control_plane_options() -> None:
    proc = _spawn_env(
        [
            "vllm",
            "--workers",
            "3",
            "--worker-namespace",
            "ns",
            "--worker-namespace",
            "ns-1a2b",
            "--worker-namespace",
            "ns2",
            "--admin-family",
            "sidecar",
        ],
        DYN_NAMESPACE_PREFIX="ns",
    )
    try:
        assert proc.stdout is not None
        info = read_ready_line(proc.stdout, timeout=20)
        assert [w["namespace"] for w in info["workers"]] == ["ns", "ns-1a2b", "ns2"]
        with httpx.Client(timeout=10) as client:
            body = client.get(info["rl"] + "/v1/rl/workers").json()
            assert body["namespace"] == "ns"
            assert [w["namespace"] for w in body["workers"]] == ["ns", "ns-1a2b"]
            assert "control/pause_generation" in body["workers"][0]["routes"]
            base = body["workers"][0]["system_url"]
            assert client.post(base + "/engine/control/is_paused").json() == {"is_paused": False}
            assert client.get(info["control"] + "/request_ledger").json() == {"requests": []}
            assert client.get(info["control"] + "/admin_ledger").json()["requests"][0]["path"] == (
                "/engine/control/is_paused"
            )
    finally:
        _stop(proc)


def test_sglang_engine_routes_option() -> None:
    proc = _spawn_env(
        ["sglang", "--workers", "1", "--engine-route", "info=get_server_info"],
        DYN_SGLANG_ENGINE_ROUTES="ignored=get_weight_version",  # the flag wins
    )
    try:
        assert proc.stdout is not None
        info = read_ready_line(proc.stdout, timeout=20)
        base = info["workers"][0]["system_url"]
        with httpx.Client(timeout=10) as client:
            assert client.post(base + "/engine/info").json()["served_model_name"] == "toy"
            assert client.post(base + "/engine/ignored").status_code == 404
    finally:
        _stop(proc)


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["sglang", "--engine-route", "x="], {}, "Invalid SGLang engine route descriptor 'x='"),
        (["sglang"], {"DYN_SGLANG_ENGINE_ROUTES": "a=nope"}, "engine target has no method 'nope'"),
        (["vllm", "--engine-route", "flush_cache"], {}, "needs backend sglang"),
        (["sglang", "--admin-family", "sidecar"], {}, "needs backend vllm"),
        (
            ["vllm", "--workers", "1", "--worker-namespace", "a", "--worker-namespace", "b"],
            {},
            "2 worker namespaces",
        ),
    ],
)
def test_configuration_errors_exit_2(args: list[str], env: dict[str, str], expected: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "fake_backends", *args],
        capture_output=True,
        env={**_env(), **env},
        cwd=REPO,
    )
    assert out.returncode == 2 and out.stdout == b""
    assert expected in out.stderr.decode()
