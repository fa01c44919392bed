"""A worker that dies is a finding of the test whose call killed it: on the fake SGLang under
`sglang_invalid_pause_mode_crashes` (a mode no engine has answered 200 ok, then the worker
dies, as SGLang 0.5.21 does), the invalid-mode cell fails on the answer with the death named
after it; the rows judged before it (every test that cannot end a worker runs first) are
judged, and the probes that could not run afterwards say so."""

from __future__ import annotations

from pathlib import Path

from .test_real_dynamo import run_launch


def test_a_crash_after_a_200_is_judged_on_the_answer_and_named(tmp_path: Path) -> None:
    matrix = run_launch(
        tmp_path,
        "--fake",
        "sglang",
        "--fault",
        "sglang_invalid_pause_mode_crashes",
        "--capability",
        "admin.invalid_pause_mode",
        "--capability",
        "admin.pause_cycles",
        "--capability",
        "refresh.version_verified",
        timeout_s=300,
    )
    cells = {row["id"]: row["cells"]["fake-sglang"] for row in matrix["capabilities"]}
    invalid = cells["admin.invalid_pause_mode"]
    assert invalid["outcome"] == "fail", invalid
    answer, death = invalid["evidence"][:2]
    assert "accepted mode" in answer["message"]
    assert "died after pause_generation" in death["message"], death
    assert "stopped answering" in death["message"]
    assert cells["refresh.version_verified"]["outcome"] == "pass"  # it ran first
    later = cells["admin.pause_cycles"]  # a probe that may end a worker too, run after it
    assert later["outcome"] == "skipped", later
    assert later["reason"].startswith("not run: the worker died at "), later["reason"]
    assert "after pause_generation" in later["reason"]
