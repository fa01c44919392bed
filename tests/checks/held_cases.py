"""Faithful and violating observations of the rules of requests a caller asked to keep: the
cache flush after a retract pause (SGLang's FlushCacheReqOutput, as Dynamo's engine route
returns it, and the cached prefix a repeated prompt reports before it and after the resume),
and a stream across a version rename that sent abort_all_requests false."""

from __future__ import annotations

from collections.abc import Callable

from rl_conformance.checks import CheckResult
from rl_conformance.checks.held_requests import (
    flush_after_retract,
    rename_keeps_requests,
    rename_reaches_token_versions,
)

Case = tuple[Callable[[], CheckResult], Callable[[], CheckResult]]

CASES: dict[str, Case] = {
    "refresh.flush_after_retract": (
        lambda: flush_after_retract(200, {"success": True, "message": ""}, 64, 0, "worker 1"),
        lambda: flush_after_retract(200, {"success": True}, 64, 64, "worker 1"),
    ),
    "refresh.rename_keeps_requests": (
        lambda: rename_keeps_requests(64, 64, "length", "choices[0]"),
        lambda: rename_keeps_requests(3, 64, {"type": "abort", "message": "Aborted"}, "meta_info"),
    ),
    "refresh.rename_reaches_token_versions": (
        lambda: rename_reaches_token_versions(
            [{"version": "v1", "start": 0, "end": 3}, {"version": "v2", "start": 3, "end": 8}],
            ("v1", "v2"),
        ),
        lambda: rename_reaches_token_versions(
            [{"version": "default", "start": 0, "end": 8}], ("v1", "v2")
        ),
    ),
}
