"""Framework consumer profiles replayed as matrix columns, against the fakes and against the real
Dynamo 1.6.1 frontend with our engine. Each expected cell follows from the framework's sources
(fixtures/framework-profiles/) and the deployment's documented surface."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.certify.profiles import PROFILES

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
P, F, U, S = "pass", "fail", "unsupported", "skipped"
# (generation, refresh surface) per framework on a vLLM Python-worker deployment.
ON_VLLM = {
    "nemo-rl": (P, P),
    "verl": (P, S),  # refresh over Ray/ZMQ
    "slime": (F, S),  # SGLang-native /generate, non-streamed: not a Dynamo vLLM route
    "prime-rl": (P, P),
}


def profiles(directory: Path, *flags: str) -> dict[str, dict[str, str]]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rl_conformance",
            "profiles",
            "-q",
            "--report-dir",
            str(directory),
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert (directory / "matrix.json").exists(), done.stderr[-3000:]
    matrix: dict[str, Any] = json.loads((directory / "matrix.json").read_text())
    assert done.returncode == matrix["exit_status"]
    # every cell answered (a `fail` is an answer: that framework would not work there)
    assert done.returncode == 0, done.stderr[-3000:]
    assert matrix["exit_rule"]["failing"] == ["error"]
    return {
        target: {row["id"]: row["cells"][target]["outcome"] for row in matrix["capabilities"]}
        for target in (t["id"] for t in matrix["targets"])
    }


def expected(outcomes: dict[str, tuple[str, str]], deployment: str) -> dict[str, dict[str, str]]:
    return {
        f"{framework}@{deployment}": {
            "profile.generation": generation,
            "profile.refresh_surface": refresh,
        }
        for framework, (generation, refresh) in outcomes.items()
    }


def test_every_profile_cites_its_sources() -> None:
    for profile in PROFILES:
        source = json.loads((ROOT / profile.source).read_text())
        assert source["framework"] == profile.framework
        assert source["sources"], profile.framework
        assert source["generation"]["route"] == profile.route


def test_profiles_as_columns_of_the_fakes(tmp_path: Path) -> None:
    cells = profiles(tmp_path)
    want = expected(ON_VLLM, "fake-vllm")
    # SGLang and TensorRT-LLM workers are not discovered: nothing to administer (documented).
    want |= expected(
        {"nemo-rl": (P, U), "verl": (P, S), "slime": (F, S), "prime-rl": (P, U)}, "fake-sglang"
    )
    want |= expected(
        {"nemo-rl": (P, U), "verl": (P, S), "slime": (F, S), "prime-rl": (P, U)}, "fake-trtllm"
    )
    # The native sidecar serves control/* and update/*, none of the Python-worker routes that
    # NeMo RL and prime-rl call.
    want |= expected(
        {"nemo-rl": (P, F), "verl": (P, S), "slime": (F, S), "prime-rl": (P, F)},
        "fake-vllm-sidecar",
    )
    assert cells == want


def test_profiles_against_the_real_frontend(dynamo_python: Path, tmp_path: Path) -> None:
    cells = profiles(
        tmp_path, "--launch", "dynamo-fake-vllm", "--dynamo-python", str(dynamo_python)
    )
    assert cells == expected(ON_VLLM, "dynamo-fake-vllm")
