"""Throughput of our fake vLLM deployment against the real Dynamo 1.6.1 frontend + mocker engine
(`DynamoLauncher("mocker")`, speedup ratio 100), both started here and measured in one run.

Three measurements, each taken in rounds: in every round both deployments are measured back to
back (the order alternates), so load from elsewhere on the machine hits both alike. Printed per
deployment: the median over the rounds (and every round's value); the ratio is the median of the
rounds' fake/mocker ratios (each from two measurements a few seconds apart).
- sequential: non-streamed 16-token completions (`/v1/completions`, `max_tokens: 16`,
  `ignore_eos: true`, a new text prompt each), one at a time, in requests per second;
- concurrent: the same with `--concurrency` requests in flight;
- streams: `--streams` streamed completions opened at once, each on its own new connection; the
  wall of the whole batch, and how many ended in a correct terminal state (exactly one choice with
  a non-null `finish_reason`, `data: [DONE]` last, no error event).

A non-streamed answer is correct when it is 200 with one choice, a non-null `finish_reason` and
`usage.completion_tokens == 16`. The load generator is httpx in this process (one client, so one
connection, per request in flight: httpcore's pool grows costly with many connections), on
uvloop when importable; it shares the machine's cores with both deployments.

Prints figures; asserts nothing. Usage: python benchmarks/fake_throughput.py [--requests N]
[--concurrency N] [--streams N] [--rounds N] [--dynamo-python PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import ssl
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from rl_conformance.launchers.dynamo import DynamoLauncher, find_dynamo_python
from rl_conformance.launchers.fake import FakeLauncher
from rl_conformance.target import Target

MAX_TOKENS = 16
PROMPT = "request {} of the run: the quick brown fox"  # a new prompt per request
TIMEOUT = httpx.Timeout(120.0)
# One SSL context for every client: building one per client costs ~30 ms (the CA bundle).
SSL_CONTEXT = ssl.create_default_context()
WARM_UP = 10


class Launcher(Protocol):
    def start(self) -> Target: ...

    def stop(self) -> None: ...


@dataclass
class Deployment:
    name: str
    launcher: Launcher
    target: Target | None = None
    sent: int = 0

    @property
    def url(self) -> str:
        assert self.target is not None
        return self.target.frontend_url + "/v1/completions"

    def body(self, *, stream: bool) -> dict[str, Any]:
        assert self.target is not None
        self.sent += 1
        return {
            "model": self.target.model,
            "prompt": PROMPT.format(self.sent),
            "max_tokens": MAX_TOKENS,
            "ignore_eos": True,
            "stream": stream,
        }


@dataclass(frozen=True)
class Batch:
    seconds: float
    sent: int
    correct: int

    @property
    def rate(self) -> float:
        return self.sent / self.seconds


def unary_correct(reply: httpx.Response) -> bool:
    if reply.status_code != 200:
        return False
    body = reply.json()
    choices = body.get("choices") or []
    return (
        len(choices) == 1
        and choices[0].get("finish_reason") is not None
        and (body.get("usage") or {}).get("completion_tokens") == MAX_TOKENS
    )


def stream_correct(status: int, text: str) -> bool:
    """Exactly one choice finished, `[DONE]` is the last event, no error anywhere."""
    if status != 200:
        return False
    data: list[str] = []
    for line in text.splitlines():
        if line.startswith("event:") and "error" in line:
            return False
        if line.startswith("data:"):
            data.append(line[5:].strip())
    if not data or data[-1] != "[DONE]" or "[DONE]" in data[:-1]:
        return False
    finished = 0
    for payload in data[:-1]:
        event = json.loads(payload)
        if "error" in event:
            return False
        finished += sum(1 for c in event.get("choices") or [] if c.get("finish_reason") is not None)
    return finished == 1


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=TIMEOUT,
        limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        trust_env=False,
        verify=SSL_CONTEXT,
    )


async def sequential(deployment: Deployment, requests: int) -> Batch:
    async with client() as http:
        for _ in range(WARM_UP):
            await http.post(deployment.url, json=deployment.body(stream=False))
        correct = 0
        started = time.perf_counter()
        for _ in range(requests):
            reply = await http.post(deployment.url, json=deployment.body(stream=False))
            correct += unary_correct(reply)
        return Batch(time.perf_counter() - started, requests, correct)


async def concurrent(deployment: Deployment, requests: int, concurrency: int) -> Batch:
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(client()) for _ in range(concurrency)]
        await asyncio.gather(
            *(http.post(deployment.url, json=deployment.body(stream=False)) for http in clients)
        )
        left = requests
        correct = 0

        async def worker(http: httpx.AsyncClient) -> None:
            nonlocal left, correct
            while left > 0:
                left -= 1
                reply = await http.post(deployment.url, json=deployment.body(stream=False))
                correct += unary_correct(reply)

        started = time.perf_counter()
        await asyncio.gather(*(worker(http) for http in clients))
        return Batch(time.perf_counter() - started, requests, correct)


async def streams(deployment: Deployment, count: int) -> Batch:
    """`count` streams on `count` new connections, all opened at once."""

    async def one() -> bool:
        body = deployment.body(stream=True)
        try:
            async with (
                client() as http,
                http.stream("POST", deployment.url, json=body) as reply,
            ):
                text = (await reply.aread()).decode("utf-8", errors="replace")
                return stream_correct(reply.status_code, text)
        except httpx.HTTPError:
            return False

    started = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(count)))
    return Batch(time.perf_counter() - started, count, sum(results))


@dataclass(frozen=True)
class Measurement:
    title: str
    unit: str
    figure: Callable[[Batch], float]
    fake_better: Callable[[float, float], float]  # (fake, mocker) -> how many times better
    run: Callable[[Deployment], Any]  # -> Awaitable[Batch]


def report(measurement: Measurement, rounds: list[tuple[Batch, Batch]]) -> None:
    figure, better = measurement.figure, measurement.fake_better
    print(measurement.title)
    for column, name in ((0, "fake vllm"), (1, "dynamo mocker")):
        batches = [pair[column] for pair in rounds]
        values = [figure(b) for b in batches]
        correct = sum(b.correct for b in batches)
        sent = sum(b.sent for b in batches)
        print(
            f"  {name:14} median {statistics.median(values):8.2f} {measurement.unit:5}"
            f"  correct {correct}/{sent}  (rounds: {', '.join(f'{v:.2f}' for v in values)})"
        )
    ratios = [better(figure(fake), figure(mocker)) for fake, mocker in rounds]
    print(
        f"  fake/mocker: {statistics.median(ratios):.2f}x"
        f"  (rounds: {', '.join(f'{r:.2f}' for r in ratios)})"
    )


async def measure(fake: Deployment, mocker: Deployment, args: argparse.Namespace) -> None:
    measurements = [
        Measurement(
            f"sequential: {args.requests} requests one at a time, per round",
            "req/s",
            lambda b: b.rate,
            lambda f, m: f / m,
            lambda d: sequential(d, args.requests),
        ),
        Measurement(
            f"concurrent: {args.requests} requests, {args.concurrency} in flight, per round",
            "req/s",
            lambda b: b.rate,
            lambda f, m: f / m,
            lambda d: concurrent(d, args.requests, args.concurrency),
        ),
        Measurement(
            f"streams: {args.streams} opened at once, wall of the batch, per round",
            "s",
            lambda b: b.seconds,
            lambda f, m: m / f,
            lambda d: streams(d, args.streams),
        ),
    ]
    results: list[list[tuple[Batch, Batch]]] = [[] for _ in measurements]
    for round_ in range(args.rounds):
        for measurement, rounds in zip(measurements, results, strict=True):
            if round_ % 2 == 0:
                first = await measurement.run(fake)
                second = await measurement.run(mocker)
                rounds.append((first, second))
            else:
                second = await measurement.run(mocker)
                first = await measurement.run(fake)
                rounds.append((first, second))
    print(f"{args.rounds} rounds; 16-token completions (ignore_eos); medians over the rounds")
    for measurement, rounds in zip(measurements, results, strict=True):
        report(measurement, rounds)


def client_loop(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    if name == "uvloop":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--requests", type=int, default=300, help="requests per rate measurement (default 300)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=64, help="in flight, concurrent measurement"
    )
    parser.add_argument("--streams", type=int, default=1000, help="streams opened at once")
    parser.add_argument("--rounds", type=int, default=7, help="rounds per measurement (default 7)")
    parser.add_argument("--dynamo-python", type=Path, default=None)
    parser.add_argument(
        "--client-loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="event loop of the load generator (default uvloop, when importable)",
    )
    args = parser.parse_args()
    python = find_dynamo_python(str(args.dynamo_python) if args.dynamo_python else None)
    if python is None:
        raise SystemExit("no Python with ai-dynamo: run `rl-conformance install-dynamo`")
    fake = Deployment("fake vllm", FakeLauncher("vllm"))
    mocker = Deployment("dynamo mocker", DynamoLauncher("mocker", python=python))
    started = time.perf_counter()
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.2f} at start")
    try:
        for deployment in (fake, mocker):
            target = deployment.launcher.start()
            deployment.target = target
            engine = [note for note in target.notes if "speedup-ratio" in note]
            print(f"{deployment.name}: {target.frontend_url}", *engine, sep="\n  ")
        factory = client_loop(args.client_loop)
        loop_name = "asyncio" if factory is asyncio.new_event_loop else "uvloop"
        print(f"load generator: httpx {httpx.__version__} on {loop_name}")
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(measure(fake, mocker, args))
    finally:
        for deployment in (fake, mocker):
            deployment.launcher.stop()
    print(
        f"total {time.perf_counter() - started:.1f} s; "
        f"load average {os.getloadavg()[0]:.2f} at the end"
    )


if __name__ == "__main__":
    main()
