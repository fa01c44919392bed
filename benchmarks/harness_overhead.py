"""The harness's cost over a bare HTTP loop, against the real Dynamo 1.6.1 frontend + mocker
engine (`DynamoLauncher("mocker")`, speedup ratio 100), started here.

One fixed request set: `--requests` non-streamed and `--requests` streamed completions (16
tokens, prompt as token ids, one at a time), sent by
- a bare loop: `httpx.Client`, the body parsed as JSON, each stream's data lines parsed as JSON;
- the harness, as the suites send and judge them: the harness `Client` (wire log, deadline,
  body and event caps, the terminal-state machine), then the checks a suite applies (status,
  JSON body, `schema.completion` / `schema.completion_chunk` on every event, one terminal per
  choice, nothing after it, `[DONE]` last, terminal success).
Rounds alternate (bare, harness, bare, ...) so load from elsewhere hits both alike; the figure
is the median harness round over the median bare round (goal: <= 1.2).

Prints figures; asserts nothing. Usage: python benchmarks/harness_overhead.py [--requests N]
[--rounds N] [--dynamo-python PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from rl_conformance.checks import streaming
from rl_conformance.client.http import Client
from rl_conformance.launchers.dynamo import DynamoLauncher
from rl_conformance.launchers.dynamo_python import find_dynamo_python
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import ConformanceFailure, Verdict
from rl_conformance.wire.exchange import Exchange

MAX_TOKENS = 16


def body(target: Target, index: int, *, stream: bool) -> dict[str, Any]:
    return {
        "model": target.model,
        "prompt": [512 + index % 300, 733, 1024, 1999, 300 + index],
        "max_tokens": MAX_TOKENS,
        "ignore_eos": True,
        "temperature": 0,
        "stream": stream,
    }


def bare_round(target: Target, requests: int) -> float:
    url = target.url("/v1/completions")
    with httpx.Client(timeout=60, trust_env=False) as http:
        started = time.perf_counter()
        for index in range(requests):
            reply = http.post(url, json=body(target, index, stream=False))
            reply.json()
            with http.stream("POST", url, json=body(target, index, stream=True)) as streamed:
                for line in streamed.iter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        json.loads(line[6:])
        return time.perf_counter() - started


def judge_unary(exchange: Exchange) -> bool:
    try:
        Verdict().json(exchange, schema="completion")
    except ConformanceFailure:
        return False
    return True


def judge_stream(exchange: Exchange) -> bool:
    verdict = Verdict()
    try:
        payloads = verdict.events(exchange, schema="completion-chunk")
        verdict.check(streaming.single_terminal(payloads), exchange)
        verdict.check(streaming.nothing_after_terminal(payloads), exchange)
        verdict.check(streaming.done_last(payloads), exchange)
        state = exchange.state.value if exchange.state else "none"
        verdict.check(streaming.terminal_success(state, exchange.state_reason), exchange)
    except ConformanceFailure:
        return False
    return True


def harness_round(target: Target, requests: int) -> tuple[float, int]:
    url = target.url("/v1/completions")
    failures = 0
    with Client(deadline_s=60) as client:
        started = time.perf_counter()
        for index in range(requests):
            unary = client.post(url, body(target, index, stream=False))
            failures += not judge_unary(unary)
            streamed = client.stream("POST", url, json_body=body(target, index, stream=True))
            failures += not judge_stream(streamed)
        return time.perf_counter() - started, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dynamo-python", type=Path, default=None)
    args = parser.parse_args()
    python = args.dynamo_python or find_dynamo_python()
    if python is None:
        print("skipped: no Python with ai-dynamo (rl-conformance install-dynamo)")
        return
    launcher = DynamoLauncher("mocker", python=python)
    target = launcher.start()
    try:
        bare_round(target, 4)  # warm both paths (connections, first-request costs)
        harness_round(target, 4)
        bare, harness, failed = [], [], 0
        for _ in range(args.rounds):
            bare.append(bare_round(target, args.requests))
            elapsed, failures = harness_round(target, args.requests)
            harness.append(elapsed)
            failed += failures
    finally:
        launcher.stop()
    sent = 2 * args.requests
    print(
        f"real Dynamo frontend + mocker: {sent} requests per round ({args.requests} unary, "
        f"{args.requests} streamed, {MAX_TOKENS} tokens), median of {args.rounds} rounds"
    )
    print(f"  bare httpx loop: {statistics.median(bare) * 1000:8.1f} ms")
    print(f"  harness + checks: {statistics.median(harness) * 1000:7.1f} ms")
    print(
        f"  harness / bare: {statistics.median(harness) / statistics.median(bare):.3f} "
        f"(goal <= 1.2); checks that failed on the mocker's answers: {failed}"
    )


if __name__ == "__main__":
    main()
