"""A frontend behind a slow or buffering link gets the verdicts it gets reached directly: every
capability that judges what a pause, a cancellation or a stream in flight did has the same cell
through the link as without it, on faithful fakes, and a pause applied in another mode still
fails behind it. The spec fixes no pace for a stream's events, and an ingress, a proxy or a
congested network between the suite and the frontend is normal (`slow_link`).

Two links, each of which turned faithful pauses into failures when the verdict read arrival
times: one delivering the frontend's replies at 64 KB/s (a stream faster than that keeps
arriving, at the link's pace, long after its pause), and one that holds them and flushes every
0.3 s (a buffering proxy). About 45 s on a 2-core machine: the three runs go at once, each on
fakes of its own, mostly waiting on the links."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from fake_backends import FakeDeployment

from .slow_link import Lateness, slow_link
from .test_launch_mode_equivalence import CHECKPOINTS, cells, run

pytestmark = pytest.mark.slow

RATE = Lateness("rate", bytes_per_s=64_000)
BUFFER = Lateness("buffer", delay_s=0.3, buffer_bytes=1_000_000)
READ_IN_FLIGHT = (
    "refresh.pause_mode_effect",
    "refresh.pause_gates",
    "admin.invalid_pause_mode",
    "admin.pause_cycles",
    "admin.resume_serves_promptly",
    "refresh.inflight_terminal",
    "cancel.propagation",
    "retry.attempt_identity",
)
"""Every capability whose tests read what a stream had delivered at a moment of a control step."""
SGLANG_HOLDS = ("refresh.pause_mode_effect", "refresh.pause_gates", "refresh.straddle_reported")
"""SGLang's own: the `in_place` and `retract` holds, its default `abort`, its native stream."""
JUDGED = ("pass", "unsupported")

Cells = dict[str, dict[str, Any]]


def by_url(fleet: FakeDeployment, frontend: str, capabilities: tuple[str, ...]) -> list[str]:
    """A mutating run by URL of `capabilities`, the frontend reached at `frontend`, the RL
    listener and the workers' system servers directly."""
    flags = ["--frontend", frontend, "--rl-url", fleet.rl_url, "--backend", fleet.assembly.backend]
    if fleet.assembly.backend != "vllm":
        for worker in fleet.workers:
            flags += ["--worker-url", worker["system_url"]]
    for capability in capabilities:
        flags += ["--capability", capability]
    return [*flags, "--allow-mutations", "--all-workers", *CHECKPOINTS]


def through(
    directory: Path,
    backend: str,
    capabilities: tuple[str, ...],
    lateness: Lateness | None,
    faults: tuple[str, ...] = (),
) -> Cells:
    """The cells of a run on a fake of its own, through a link late by `lateness` (None: direct)."""
    with FakeDeployment(backend, workers=2, faults=faults) as fleet:
        if lateness is None:
            return cells(run(directory, *by_url(fleet, fleet.frontend_url, capabilities)))
        with slow_link(fleet.frontend_url, lateness) as url:
            return cells(run(directory, *by_url(fleet, url, capabilities)))


def outcomes(found: Cells) -> dict[str, tuple[str, str]]:
    return {
        capability: (cell["outcome"], cell["reason"][:300]) for capability, cell in found.items()
    }


def test_a_slow_or_buffering_link_changes_no_verdict(tmp_path: Path) -> None:
    runs = {
        "vllm": ("vllm", READ_IN_FLIGHT, RATE, ()),
        "sglang": ("sglang", SGLANG_HOLDS, BUFFER, ()),
        "ignored": ("vllm", ("refresh.pause_mode_effect",), RATE, ("pause_mode_ignored",)),
    }

    def both(name: str) -> tuple[Cells, Cells]:
        backend, capabilities, lateness, faults = runs[name]
        if faults:  # the faithful runs say what reaching the frontend directly gives
            return {}, through(tmp_path / name, backend, capabilities, lateness, faults)
        direct = through(tmp_path / f"{name}-direct", backend, capabilities, None)
        return direct, through(tmp_path / name, backend, capabilities, lateness)

    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        found = dict(zip(runs, pool.map(both, runs), strict=True))
    for name in ("vllm", "sglang"):
        direct, linked = found[name]
        assert all(cell["outcome"] in JUDGED for cell in direct.values()), outcomes(direct)
        assert outcomes(linked).keys() == outcomes(direct).keys()
        changed = {
            capability: (direct[capability]["outcome"], outcomes(linked)[capability])
            for capability in direct
            if linked[capability]["outcome"] != direct[capability]["outcome"]
        }
        assert not changed, (name, changed)
    ignored = found["ignored"][1]["refresh.pause_mode_effect"]
    assert ignored["outcome"] == "fail", ignored["reason"]
    assert "less than 90% of it when the pause answered" in ignored["reason"], ignored["reason"]
