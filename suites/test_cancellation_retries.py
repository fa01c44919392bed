"""Cancellation reaches the engine; retries keep attempt identity; late duplicates are visible.

The deployment-side evidence comes from a request ledger (our fakes' control port)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from rl_conformance.checks import control
from rl_conformance.client import Client
from rl_conformance.target import Target
from rl_conformance.verdict import Verdict

capability = pytest.mark.capability
PROMPT = [512, 733, 1024, 1999, 300]


def ledger_entries(client: Client, target: Target, attempt: str) -> list[dict[str, Any]]:
    exchange = client.get(f"{target.control_url}/ledger")
    requests = exchange.json().get("requests", []) if exchange.status == 200 else []
    return [entry for entry in requests if entry.get("attempt_id") == attempt]


def require_ledger(target: Target) -> None:
    if not target.control_url:
        pytest.skip(
            "no request ledger on this target: cancellation and late completions cannot "
            "be observed from outside"
        )


def wait_for(predicate: Any, timeout_s: float = 3.0) -> Any:
    deadline = time.monotonic() + timeout_s
    value = predicate()
    while not value and time.monotonic() < deadline:
        time.sleep(0.05)
        value = predicate()
    return value


@capability("cancel.propagation")
def test_closing_a_stream_aborts_the_generation(
    client: Client, target: Target, verdict: Verdict
) -> None:
    require_ledger(target)
    attempt = f"conformance-{uuid.uuid4().hex}"
    body = {
        "model": target.model,
        "prompt": PROMPT,
        "max_tokens": 64,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
    }
    exchange = client.stream(
        "POST",
        target.url("/v1/completions"),
        json_body=body,
        headers={"x-request-id": attempt, "x-fake-delay-ms": "0"},
        cancel_after_events=1,
    )
    verdict.status(exchange)

    def settled() -> list[dict[str, Any]]:
        entries = ledger_entries(client, target, attempt)
        return [e for e in entries if e.get("outcome") not in (None, "running")]

    entries = wait_for(settled) or ledger_entries(client, target, attempt)
    outcome = entries[0].get("outcome") if entries else "no ledger entry"
    verdict.check(control.cancellation_propagated(outcome, attempt), exchange)


@capability("retry.attempt_identity")
def test_retry_after_timeout_keeps_attempts_distinguishable(
    client: Client, target: Target, verdict: Verdict
) -> None:
    attempt = f"conformance-{uuid.uuid4().hex}"
    body = {"model": target.model, "prompt": PROMPT, "max_tokens": 4, "temperature": 0}
    headers = {"x-request-id": attempt}
    slow = client.request(
        "POST",
        target.url("/v1/completions"),
        json_body=body,
        headers={**headers, "x-fake-delay-ms": "800"},
        deadline_s=0.3,
    )
    retry = client.request("POST", target.url("/v1/completions"), json_body=body, headers=headers)
    parsed = verdict.json(retry)
    ids = [parsed.get("id")]
    if target.control_url:

        def settled() -> list[dict[str, Any]]:
            entries = ledger_entries(client, target, attempt)
            done = [entry for entry in entries if entry.get("outcome") not in (None, "running")]
            return done if len(entries) >= 2 and len(done) == len(entries) else []

        entries = wait_for(settled, 3.0) or ledger_entries(client, target, attempt)
        completed = [entry for entry in entries if entry.get("outcome") == "completed"]
        ids += [
            entry["response_id"]
            for entry in completed
            if entry.get("response_id") and entry["response_id"] != parsed.get("id")
        ]
        verdict.check(control.late_completion_detected(len(completed)), retry)
    verdict.check(control.attempt_identity(attempt, retry.headers.get("x-request-id"), ids), retry)
    assert slow.status is None or slow.status == 200
