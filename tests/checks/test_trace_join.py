"""Framework attempts joined with Dynamo's request trace, and the trace read as it is written."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from rl_conformance.checks import trace
from rl_conformance.wire.request_trace import TraceReader

SCHEMA = "dynamo.request.trace.v1"


def payload(request_id: str, **headers: str) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "event_type": "request_payload",
        "payload": {"request_id": request_id, "http_request_headers": headers},
    }


def end(request_id: str) -> dict[str, Any]:
    return {"schema": SCHEMA, "event_type": "request_end", "request": {"request_id": request_id}}


def headers(rollout: str, attempt: str, policy: str = "p2") -> dict[str, str]:
    # Capture is case-insensitive: upstream's fixtures hold both spellings.
    return {"X-RL-Rollout-ID": rollout, "x-rl-attempt-id": attempt, "X-RL-Policy-Version": policy}


def test_complete_incomplete_and_missing_attempts_are_told_apart() -> None:
    attempts = [
        trace.Attempt("r7", "a1", "p2"),
        trace.Attempt("r8", "a1", "p2"),
        trace.Attempt("r9", "a1", "p2", terminal_expected=False),
        trace.Attempt("r10", "a1", "p2"),
    ]
    rows = [
        payload("q101", **headers("r7", "a1")),
        end("q101"),
        payload("q102", **headers("r8", "a1")),
        payload("q103", **headers("r9", "a1")),
        payload("q999", **headers("someone-else", "a1")),
        end("q999"),
    ]
    join = trace.join_attempts(attempts, rows)
    assert [item.status for item in join.joined] == [
        "complete",
        "missing_terminal",
        "expected_incomplete",
        "missing_payload",
    ]
    assert join.counts["joined_payloads"] == 3
    assert join.counts["expected_terminals"] == 3
    assert join.counts["joined_terminals"] == 1
    assert join.counts["strict_violations"] == 2
    assert not join.settled
    found = trace.trace_correlation(join)
    assert [v.field for v in found.violations] == [
        "request_end.request.request_id",
        "payload.http_request_headers",
    ]


def test_policy_mismatch_duplicates_and_unexpected_terminals_fail() -> None:
    attempts = [
        trace.Attempt("r1", "a1", "p2"),
        trace.Attempt("r1", "a2", "p2"),
        trace.Attempt("r1", "a3", "p2", terminal_expected=False),
    ]
    rows = [
        payload("q1", **headers("r1", "a1", policy="p1")),
        end("q1"),
        payload("q2", **headers("r1", "a2")),
        payload("q3", **headers("r1", "a2")),
        payload("q4", **headers("r1", "a3")),
        end("q4"),
    ]
    join = trace.join_attempts(attempts, rows)
    assert [item.status for item in join.joined] == [
        "complete",
        "duplicate_payload",
        "unexpected_terminal",
    ]
    assert join.counts["policy_mismatches"] == 1
    messages = [v.message for v in trace.trace_correlation(join).violations]
    assert any("X-RL-Policy-Version" in m for m in messages)
    assert any("2 Dynamo requests" in m for m in messages)
    assert any("abandoned" in m for m in messages)


def test_identity_as_metric_label_fails_and_bounded_labels_pass() -> None:
    attempt = trace.Attempt("r1", "a1")
    join = trace.join_attempts([attempt], [payload("q1", **headers("r1", "a1")), end("q1")])
    clean = 'dynamo_frontend_requests_total{model="m",endpoint="chat"} 3\n'
    leaking = 'dynamo_frontend_requests_total{model="m",rl_attempt_id="a1"} 1\n'
    assert trace.trace_correlation(join, [("frontend", clean)]).passed
    result = trace.trace_correlation(join, [("frontend", leaking)])
    assert result.violations[0].observed == "a1"


def test_reader_takes_both_row_shapes_and_waits_for_a_whole_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    wrapped = {"timestamp": 12, "event": payload("q1", **headers("r1", "a1"))}
    path.write_text(json.dumps(wrapped) + "\n" + "not json\n" + json.dumps(end("q1"))[:20])
    reader = TraceReader(path)
    seen = reader.read()
    assert [row["event_type"] for row in seen.rows] == ["request_payload"]
    assert seen.unreadable == 1
    with path.open("a") as sink:
        sink.write(json.dumps(end("q1"))[20:] + "\n")
    assert [row["event_type"] for row in reader.read().rows] == ["request_payload", "request_end"]


def test_reader_reads_gzip_segments_of_a_prefix(tmp_path: Path) -> None:
    prefix = tmp_path / "dynamo-request-trace"
    for number, rows in enumerate([[payload("q1", **headers("r1", "a1"))], [end("q1")]]):
        text = "".join(json.dumps(row) + "\n" for row in rows)
        (tmp_path / f"dynamo-request-trace.{number}.jsonl.gz").write_bytes(
            gzip.compress(text.encode())
        )
    seen = TraceReader(prefix).read()
    assert seen.files == 2
    join = trace.join_attempts([trace.Attempt("r1", "a1", "p2")], seen.rows)
    assert join.settled
