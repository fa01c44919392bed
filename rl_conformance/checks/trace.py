"""Framework attempts joined with Dynamo's request trace, and the correlation check.

A framework sends opaque `X-RL-Rollout-ID`, `X-RL-Attempt-ID` and `X-RL-Policy-Version` headers;
the frontend captures allowlisted headers on its `request_payload` rows and ends each request
with a `request_end` row of the same Dynamo request id. An attempt is correlated when exactly one
payload row carries its rollout and attempt ids, the captured policy version is the one sent,
and, when the attempt was expected to finish, an end row closes that request. The counts follow
upstream's join (`docs/fern/scripts/rl_trace_join.py`), restricted to the rollouts the caller
names: a trace holds every other request of the deployment too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import contract
from ..wire.prometheus import parse, series
from ..wire.request_trace import END, PAYLOAD, payload_headers, request_id
from .base import Findings, Violation, check

ROLLOUT_HEADER = "x-rl-rollout-id"
ATTEMPT_HEADER = "x-rl-attempt-id"
POLICY_HEADER = "x-rl-policy-version"
HEADERS = (ATTEMPT_HEADER, ROLLOUT_HEADER, POLICY_HEADER)


@dataclass(frozen=True)
class Attempt:
    rollout_id: str
    attempt_id: str
    policy_version: str | None = None
    terminal_expected: bool = True
    route: str = ""

    def headers(self) -> dict[str, str]:
        sent = {ROLLOUT_HEADER: self.rollout_id, ATTEMPT_HEADER: self.attempt_id}
        if self.policy_version is not None:
            sent[POLICY_HEADER] = self.policy_version
        return sent


@dataclass
class JoinedAttempt:
    attempt: Attempt
    status: str
    """complete | expected_incomplete | missing_payload | missing_terminal |
    unexpected_terminal | duplicate_payload"""
    request_ids: list[str] = field(default_factory=list)
    observed_policy: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "rollout_id": self.attempt.rollout_id,
            "attempt_id": self.attempt.attempt_id,
            "route": self.attempt.route,
            "terminal_expected": self.attempt.terminal_expected,
            "join_status": self.status,
            "dynamo_request_ids": self.request_ids,
            "sent_policy_version": self.attempt.policy_version,
            "observed_policy_version": self.observed_policy,
        }


@dataclass
class TraceJoin:
    joined: list[JoinedAttempt]
    counts: dict[str, int]

    @property
    def settled(self) -> bool:
        """Every attempt has its payload and, where expected, its terminal: nothing more to wait
        for."""
        return all(item.status in {"complete", "expected_incomplete"} for item in self.joined)

    def to_json(self) -> dict[str, Any]:
        return {"counts": self.counts, "attempts": [item.to_json() for item in self.joined]}


COUNTS = (
    "framework_attempts",
    "payload_records",
    "terminal_records",
    "payloads_with_rl_headers",
    "joined_payloads",
    "expected_terminals",
    "joined_terminals",
    "complete",
    "expected_incomplete",
    "missing_payload",
    "missing_terminal",
    "unexpected_terminal",
    "duplicate_payload",
    "policy_mismatches",
    "strict_violations",
)


def join_attempts(attempts: Sequence[Attempt], rows: Iterable[dict[str, Any]]) -> TraceJoin:
    counts = dict.fromkeys(COUNTS, 0)
    counts["framework_attempts"] = len(attempts)
    rollouts = {attempt.rollout_id for attempt in attempts}
    payloads: dict[tuple[str, str], list[tuple[str, dict[str, str]]]] = {}
    ended: set[str] = set()
    for row in rows:
        kind = row.get("event_type")
        rid = request_id(row)
        if kind == END and rid is not None:
            counts["terminal_records"] += 1
            ended.add(rid)
        elif kind == PAYLOAD and rid is not None:
            counts["payload_records"] += 1
            headers = payload_headers(row)
            if ROLLOUT_HEADER in headers or ATTEMPT_HEADER in headers:
                counts["payloads_with_rl_headers"] += 1
            rollout = headers.get(ROLLOUT_HEADER)
            if rollout in rollouts and ATTEMPT_HEADER in headers:
                payloads.setdefault((rollout, headers[ATTEMPT_HEADER]), []).append((rid, headers))
    joined = []
    for attempt in attempts:
        matches = payloads.get((attempt.rollout_id, attempt.attempt_id), [])
        item = JoinedAttempt(attempt, "missing_payload", [rid for rid, _ in matches])
        counts["expected_terminals"] += attempt.terminal_expected
        if matches:
            counts["joined_payloads"] += 1
            item.observed_policy = matches[0][1].get(POLICY_HEADER)
            terminal = any(rid in ended for rid, _ in matches)
            counts["joined_terminals"] += terminal
            if len(matches) > 1:
                item.status = "duplicate_payload"
            elif terminal:
                item.status = "complete" if attempt.terminal_expected else "unexpected_terminal"
            else:
                item.status = (
                    "missing_terminal" if attempt.terminal_expected else ("expected_incomplete")
                )
            if (
                attempt.policy_version is not None
                and item.observed_policy != attempt.policy_version
            ):
                counts["policy_mismatches"] += 1
                counts["strict_violations"] += 1
        counts[item.status] += 1
        if item.status not in {"complete", "expected_incomplete"}:
            counts["strict_violations"] += 1
        joined.append(item)
    return TraceJoin(joined, counts)


def _labelled(metrics_text: str, values: set[str]) -> tuple[str, str, str] | None:
    for name, labels in sorted(series(parse(metrics_text))):
        for label, value in labels:
            if value in values:
                return name, label, value
    return None


@check(contract.telemetry.TRACE_CORRELATION)
def trace_correlation(join: TraceJoin, metrics: Sequence[tuple[str, str]] = ()) -> Findings:
    """`metrics`: (where, Prometheus text) read after the attempts, frontend and workers."""
    for item in join.joined:
        attempt = item.attempt
        where = f"attempt {attempt.attempt_id} of rollout {attempt.rollout_id} ({attempt.route})"
        if item.status == "missing_payload":
            yield Violation(
                f"{where}: no request_payload row carries its X-RL-Rollout-ID and X-RL-Attempt-ID",
                "payload.http_request_headers",
                attempt.headers(),
                "no such row",
            )
        elif item.status == "duplicate_payload":
            yield Violation(
                f"{where}: {len(item.request_ids)} Dynamo requests carry one attempt's identity",
                "payload.request_id",
                "one request",
                item.request_ids,
            )
        elif item.status == "missing_terminal":
            yield Violation(
                f"{where}: Dynamo request {item.request_ids[0]} has no request_end row",
                "request_end.request.request_id",
                item.request_ids[0],
                "no such row",
            )
        elif item.status == "unexpected_terminal":
            yield Violation(
                f"{where}: a request the client abandoned has a request_end row",
                "request_end.request.request_id",
                "no terminal",
                item.request_ids[0],
            )
        if (
            attempt.policy_version is not None
            and item.request_ids
            and (item.observed_policy != attempt.policy_version)
        ):
            yield Violation(
                f"{where}: the captured X-RL-Policy-Version is not the one sent",
                f"payload.http_request_headers.{POLICY_HEADER}",
                attempt.policy_version,
                item.observed_policy,
            )
    identities = {a.attempt.attempt_id for a in join.joined} | {
        a.attempt.rollout_id for a in join.joined
    }
    for where, text in metrics:
        found = _labelled(text, identities)
        if found is not None:
            name, label, value = found
            yield Violation(
                f"{where}: metric {name} carries a framework identity as label {label}",
                f"{name}{{{label}}}",
                "no X-RL-* value as a metric label",
                value,
            )
