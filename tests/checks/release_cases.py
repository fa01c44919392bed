"""Faithful and violating observations of the checks of release-specific rules, from real replies:
the weight-version declaration (Dynamo 1.6.1's vLLM worker, `fixtures/dynamo-1.6.1/vllm-cpu/`)
and a metadata_upload refusal's reason (1.7.0.dev20261026 against 1.6.1); a restarted engine's
worker and stream."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rl_conformance.checks import CheckResult
from rl_conformance.checks.declaration import Declared, version_declaration
from rl_conformance.checks.errors import refusal_reason
from rl_conformance.checks.recovery import (
    crashed_stream_not_clean,
    recovered_sample_version,
    recovered_version,
)
from rl_conformance.checks.terminal import Ending

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "dynamo-1.6.1" / "vllm-cpu"
Case = tuple[Callable[[], CheckResult], Callable[[], CheckResult]]


def recorded(name: str) -> Any:
    return json.loads((RECORDED / f"{name}.json").read_text())["response"]["body"]


def unversioned_update(after: dict[str, Any] | None = None) -> list[Declared]:
    """An update without weight_version, then get_weight_version: the version declared before
    (`untied-1`) stays."""
    stored = after or recorded("flow_13_get_weight_version_after_unversioned_update")
    return [
        Declared("update", recorded("flow_12_update_back_no_version"), "unknown", False),
        Declared("get after it", stored, "untied-1", True),
    ]


CASES: dict[str, Case] = {
    "admin.version_declaration": (
        lambda: version_declaration(unversioned_update()),
        lambda: version_declaration(
            unversioned_update({"status": "ok", "version": "unknown", "version_declared": True})
        ),
    ),
}


SHAPES = json.loads(
    (RECORDED.parents[1] / "dynamo-1.7.0.dev20261026" / "metadata_upload_shapes.json").read_text()
)["cases"]
"""The real frontends' answers to each `nvext.metadata_upload` shape, by release."""
STOP_REASON = "generation_artifact metadata_upload does not support stop strings"


def refusal(release: str) -> CheckResult:
    answer = SHAPES["ga_stop"][release]
    return refusal_reason(answer["status"], answer["body"], STOP_REASON)


CASES["errors.refusal_reason"] = (lambda: refusal("1.7.0.dev20261026"), lambda: refusal("1.6.1"))


def ending(ids: int) -> Ending:
    return Ending(finish_reason="stop", completion_ids=list(range(ids)))


CASES["refresh.recovered_version"] = (
    lambda: recovered_version("step-7", None, "worker 1"),
    lambda: recovered_version("step-7", "step-7", "worker 1"),
)
CASES["refresh.crashed_stream_not_clean"] = (
    lambda: crashed_stream_not_clean("failed", ending(4), 512),
    lambda: crashed_stream_not_clean("success", ending(4), 512),
)
CASES["refresh.recovered_sample_version"] = (
    lambda: recovered_sample_version("step-7", None, "worker 1"),
    lambda: recovered_sample_version("step-7", "step-7", "worker 1"),
)
