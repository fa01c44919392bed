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
`usage.completion_tokens == 16`. The load generator runs in this process, on uvloop when
importable, and shares the machine's cores with both deployments: by default a minimal HTTP/1.1
keep-alive client (`RawConnection`, one connection per request in flight), so the figures
measure the deployments rather than the client; `--load-generator httpx` uses httpx (one client
per request in flight: httpcore's pool grows costly with many connections), which costs about a
millisecond of CPU per request, as much as the fake's whole answer.

Prints figures; asserts nothing. Usage: python benchmarks/fake_throughput.py [--requests N]
[--concurrency N] [--streams N] [--rounds N] [--load-generator raw|httpx]
[--dynamo-python PATH]
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
from urllib.parse import urlsplit

import httpx

from rl_conformance.launchers.dynamo import DynamoLauncher
from rl_conformance.launchers.dynamo_python import find_dynamo_python
from rl_conformance.launchers.fake import FakeLauncher
from rl_conformance.model.target import Target

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


class RawConnection:
    """A minimal HTTP/1.1 keep-alive client over asyncio streams: the load generator by default,
    so the figures measure the deployments, not the client (httpx costs about a millisecond of
    this machine's CPU per request, as much as the fake's whole answer; `--load-generator
    httpx` measures with it). Reads Content-Length and chunked bodies; nothing else is needed
    for a JSON answer or an event stream."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "", parts.port or 80, parts.path
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> RawConnection:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()

    async def post(self, body: dict[str, Any]) -> tuple[int, bytes]:
        assert self.reader is not None and self.writer is not None
        payload = json.dumps(body).encode()
        self.writer.write(
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:] if line)
        }
        if "content-length" in headers:
            return status, await self.reader.readexactly(int(headers["content-length"]))
        if headers.get("transfer-encoding", "").lower() == "chunked":
            pieces = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    return status, b"".join(pieces)
                pieces.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
        return status, await self.reader.read()  # until the server closes


def raw_unary_correct(status: int, body: bytes) -> bool:
    if status != 200:
        return False
    answer = json.loads(body)
    choices = answer.get("choices") or []
    return (
        len(choices) == 1
        and choices[0].get("finish_reason") is not None
        and (answer.get("usage") or {}).get("completion_tokens") == MAX_TOKENS
    )


async def raw_sequential(deployment: Deployment, requests: int) -> Batch:
    async with RawConnection(deployment.url) as connection:
        for _ in range(WARM_UP):
            await connection.post(deployment.body(stream=False))
        correct = 0
        started = time.perf_counter()
        for _ in range(requests):
            answer = await connection.post(deployment.body(stream=False))
            correct += raw_unary_correct(*answer)
        return Batch(time.perf_counter() - started, requests, correct)


async def raw_concurrent(deployment: Deployment, requests: int, concurrency: int) -> Batch:
    async with contextlib.AsyncExitStack() as stack:
        connections = [
            await stack.enter_async_context(RawConnection(deployment.url))
            for _ in range(concurrency)
        ]
        await asyncio.gather(*(c.post(deployment.body(stream=False)) for c in connections))
        left = requests
        correct = 0

        async def worker(connection: RawConnection) -> None:
            nonlocal left, correct
            while left > 0:
                left -= 1
                answer = await connection.post(deployment.body(stream=False))
                correct += raw_unary_correct(*answer)

        started = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in connections))
        return Batch(time.perf_counter() - started, requests, correct)


async def raw_streams(deployment: Deployment, count: int) -> Batch:
    """`count` streams on `count` new connections, all opened at once."""

    async def one() -> bool:
        try:
            async with RawConnection(deployment.url) as connection:
                status, body = await connection.post(deployment.body(stream=True))
                return stream_correct(status, body.decode("utf-8", errors="replace"))
        except (OSError, asyncio.IncompleteReadError, ValueError):
            return False

    started = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(count)))
    return Batch(time.perf_counter() - started, count, sum(results))


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
    raw = args.load_generator == "raw"
    run_sequential = raw_sequential if raw else sequential
    run_concurrent = raw_concurrent if raw else concurrent
    run_streams = raw_streams if raw else streams
    measurements = [
        Measurement(
            f"sequential: {args.requests} requests one at a time, per round",
            "req/s",
            lambda b: b.rate,
            lambda f, m: f / m,
            lambda d: run_sequential(d, args.requests),
        ),
        Measurement(
            f"concurrent: {args.requests} requests, {args.concurrency} in flight, per round",
            "req/s",
            lambda b: b.rate,
            lambda f, m: f / m,
            lambda d: run_concurrent(d, args.requests, args.concurrency),
        ),
        Measurement(
            f"streams: {args.streams} opened at once, wall of the batch, per round",
            "s",
            lambda b: b.seconds,
            lambda f, m: m / f,
            lambda d: run_streams(d, args.streams),
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
        "--load-generator",
        choices=("raw", "httpx"),
        default="raw",
        help="raw: a minimal HTTP/1.1 client (default); httpx: httpx.AsyncClient",
    )
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
        generator = (
            "a minimal HTTP/1.1 client"
            if args.load_generator == "raw"
            else f"httpx {httpx.__version__}"
        )
        print(f"load generator: {generator} on {loop_name}")
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
