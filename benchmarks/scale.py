"""The harness at scale: a 10,000-worker discovery body, the SSE parser, a 100,000-token stream.

1. Discovery: a realistic 10,000-worker `/v1/rl/workers` body (protocol v1), parsed from JSON
   as the client gets it, validated as the suite validates it: `schema.discovery_v1` and the
   discovery invariant checks (goal: median under 100 ms).
2. SSE parser: realistic OpenAI completion chunks fed in network-sized pieces (goal: at least
   50,000 events/s), and its tracemalloc peak for 10k, 100k and 1M events (goal: the same).
3. A 100,000-token stream over real HTTP from a local server (127.0.0.1, ephemeral port, a child
   process stopped at the end) through `Client.stream`, the terminal-state machine and the
   folded stream checks, with the tracemalloc peak for 10k and 100k tokens (goal: no growth but
   the folded token ids and logprobs, 16 bytes a token), then once with two faults planted deep
   in the stream to show the verdicts are computed, not vacuous.

Prints figures; asserts nothing. Usage: python benchmarks/scale.py [--quick] [--reference]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import socket
import statistics
import subprocess
import sys
import time
import tracemalloc
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

VOCABULARY = 151_936
TEXTS = [" the", " of", " and", " to", " café", " 日本", " résumé", "\\n", " x", " €"]
ROUTES = [
    "control/get_weight_version",
    "control/is_paused",
    "control/is_sleeping",
    "control/pause_generation",
    "control/resume_generation",
    "control/sleep",
    "control/wake_up",
    "update/finish_weight_update",
    "update/init_weight_transfer_engine",
    "update/model_taints",
    "update/start_weight_update",
    "update/update_weight_version",
    "update/update_weights",
]


@dataclass(frozen=True)
class Timing:
    """Milliseconds over several runs: wall clock (median, min, max) and this process's CPU
    time (median), which other processes competing for the cores do not inflate."""

    median: float
    low: float
    high: float
    cpu: float

    def __str__(self) -> str:
        return (
            f"median {self.median:.1f} ms wall (min {self.low:.1f}, max {self.high:.1f}), "
            f"{self.cpu:.1f} ms CPU"
        )


def timed(run: Callable[[], object], repeat: int) -> Timing:
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        cpus.append((time.process_time() - cpu) * 1000)
        walls.append((time.perf_counter() - wall) * 1000)
    return Timing(statistics.median(walls), min(walls), max(walls), statistics.median(cpus))


# --------------------------------------------------------------------------- 1. discovery


def discovery_body(workers: int, seed: int = 0) -> dict[str, Any]:
    """Distinct u64 instance ids (most above 2^53), eight worker namespaces, tcp and nats
    transports, system URLs, world sizes, admin URLs on some, route sets of several sizes, and
    a few workers whose probe failed (listed with `error`, routes [] and no URLs)."""
    rng = random.Random(seed)
    ids: set[int] = set()
    while len(ids) < workers:
        ids.add(rng.getrandbits(64))
    listed = []
    for position, instance in enumerate(sorted(ids)):
        namespace = f"rl-{position % 8}"
        host = f"10.{position >> 16 & 255}.{position >> 8 & 255}.{position & 255}"
        worker: dict[str, Any] = {
            "namespace": namespace,
            "component": "backend",
            "endpoint": "rl",
            "instance_id": instance,
            "transport": (
                {"tcp": f"{host}:{20000 + position % 40000}/{instance:016x}/{namespace}/backend/rl"}
                if position % 5
                else {"nats_tcp": f"{namespace}.backend.rl-{instance:x}"}
            ),
            "request_plane_url": f"dyn://{namespace}.backend.rl",
        }
        if position % 997 == 3:
            worker.update(routes=[], error="worker discovery timed out after 30s")
        else:
            worker.update(
                system_url=f"http://{host}:28181",
                model="Qwen/Qwen3-8B",
                routes=ROUTES[: 7 + position % 7],
                world_size=rng.choice([1, 2, 4, 8]),
            )
            if position % 3 == 0:
                worker["admin_base_url"] = f"http://{host}:18199/"
        listed.append(worker)
    return {"protocol_version": 1, "namespace": "rl", "workers": listed}


def bench_discovery(repeat: int, reference: bool) -> None:
    from rl_conformance.checks import discovery, schema_check, schema_registry

    text = json.dumps(discovery_body(10_000))
    body, second_read = json.loads(text), json.loads(text)
    invariants: list[tuple[str, Callable[[], Any]]] = [
        ("schema.discovery_v1", lambda: schema_check("discovery-v1", body)),
        ("discovery.protocol_version", lambda: discovery.protocol_version(body)),
        ("discovery.dynamo_listener", lambda: discovery.dynamo_listener(body)),
        ("discovery.optional_fields", lambda: discovery.optional_fields(body)),
        ("discovery.routes_well_formed", lambda: discovery.routes_well_formed(body)),
        ("discovery.request_plane_url", lambda: discovery.request_plane_url(body)),
        ("discovery.instance_ids", lambda: discovery.instance_ids(body)),
        ("discovery.error_fails_closed", lambda: discovery.error_fails_closed(body)),
        ("discovery.identity_stable", lambda: discovery.identity_stable(body, second_read)),
    ]
    verdicts = [run() for _, run in invariants]  # also warms the compiled validators
    engine = "jsonschema_rs" if schema_registry.fast_validator("discovery-v1") else "jsonschema"
    print(f"1. discovery: 10,000 workers, {len(text) / 1e6:.1f} MB of JSON, schema engine {engine}")
    print(f"   every check passes: {all(v.passed for v in verdicts)}")
    one_body = invariants[:-1]
    one_body = invariants[:-1]
    print(f"   {repeat} runs each; goal: the schema and the invariant checks in <= 100 ms")
    alone = timed(lambda: [run() for _, run in one_body], repeat)
    print(f"   schema + {len(one_body) - 1} checks of one body:    {alone}")
    both = timed(lambda: [run() for _, run in invariants], repeat)
    print(f"   + identity_stable (two reads): {both}")
    for name, run in invariants:
        print(f"     {name:32s} {timed(run, repeat).median:7.2f} ms wall")
    if reference:
        slow = timed(lambda: schema_registry.validator("discovery-v1").is_valid(body), 1)
        print(f"   (the schema on the reference jsonschema engine alone: {slow.median:.0f} ms)")


# --------------------------------------------------------------------------- 2. SSE parser


def completion_chunk(position: int) -> dict[str, Any]:
    token = (position * 7919 + 13) % VOCABULARY
    text = TEXTS[position % len(TEXTS)]
    value = -((position % 97) / 32)
    return {
        "id": "cmpl-7f3c2a9e4b1d4c6f8a0e2b5d9c1f3a7e",
        "object": "text_completion",
        "created": 1767225600,
        "model": "Qwen/Qwen3-8B",
        "choices": [
            {
                "index": 0,
                "text": text,
                "logprobs": {
                    "tokens": [text],
                    "token_logprobs": [value],
                    "top_logprobs": [{text: value, " alt": value - 1.5}],
                    "text_offset": [position * 4],
                },
                "finish_reason": None,
            }
        ],
        "nvext": {"completion_token_ids": [token]},
    }


def encode(payload: Any) -> bytes:
    text = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


def sse_pieces(events: int, piece: int, pool: list[bytes], blob: bytes) -> Iterator[bytes]:
    """`events` events cycling through `pool` (`blob` is the pool joined), cut every `piece`
    bytes (anywhere: inside a line or a UTF-8 character), without the whole stream ever existing
    at once."""
    full, rest = divmod(events, len(pool))
    total = full * len(blob) + sum(len(event) for event in pool[:rest])
    for start in range(0, total, piece):
        size = min(piece, total - start)
        offset = start % len(blob)
        end = offset + size
        yield blob[offset:end] if end <= len(blob) else blob[offset:] + blob[: end - len(blob)]


def parse_all(events: int, piece: int, pool: list[bytes], blob: bytes) -> int:
    from rl_conformance.wire.sse import SSEParser

    parser = SSEParser()
    count = 0
    for data in sse_pieces(events, piece, pool, blob):
        count += len(parser.feed(data))
    return count + len(parser.close())


def bench_sse(quick: bool) -> None:
    pool = [encode(completion_chunk(position)) for position in range(1000)]
    blob = b"".join(pool)
    print(
        f"\n2. SSE parser: OpenAI completion chunks with logprobs, {len(blob) / len(pool):.0f} "
        "bytes an event, consumed and dropped"
    )
    events = 100_000 if quick else 200_000
    for piece in (1_460, 16_384, 65_536):
        rates = []
        for _ in range(3):
            started = time.perf_counter()
            parsed = parse_all(events, piece, pool, blob)
            rates.append(parsed / (time.perf_counter() - started))
        print(
            f"   {piece:6d}-byte pieces: median {statistics.median(rates):9,.0f} events/s "
            f"({events:,} events, 3 runs)   goal >= 50,000"
        )
    for count in (10_000, 100_000) if quick else (10_000, 100_000, 1_000_000):
        gc.collect()
        tracemalloc.start()
        parsed = parse_all(count, 16_384, pool, blob)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"   tracemalloc peak, {parsed:>9,} events in 16 KiB pieces: {peak / 1024:7.1f} KiB")


# --------------------------------------------------------------------------- 3. HTTP stream

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def serve() -> None:
    """The child process: a streaming completions endpoint on an ephemeral loopback port, one
    connection at a time, until it is terminated. The request's `max_tokens` sets the length;
    `swap_id_at` and `shift_logprob_at` plant faults."""
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    while True:
        connection, _ = listener.accept()
        with connection:
            connection.sendall(HEAD)
            for data in stream_body(read_request(connection)):
                connection.sendall(b"%x\r\n%s\r\n" % (len(data), data))
            connection.sendall(b"0\r\n\r\n")


def read_request(connection: socket.socket) -> dict[str, Any]:
    received = b""
    while b"\r\n\r\n" not in received:
        received += connection.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    fields = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:])
    length = int({key.lower(): value for key, value in fields.items()}[b"content-length"])
    while len(body) < length:
        body += connection.recv(65536)
    request: dict[str, Any] = json.loads(body)
    return request


def stream_body(request: dict[str, Any]) -> Iterator[bytes]:
    """One-token completion chunks, 64 to a write, then the terminal chunk, usage and [DONE]."""
    tokens = request["max_tokens"]
    batch: list[bytes] = []
    for position in range(tokens):
        chunk = completion_chunk(position)
        if position == request.get("swap_id_at"):
            chunk["nvext"]["completion_token_ids"][0] += 1
        if position == request.get("shift_logprob_at"):
            chunk["choices"][0]["logprobs"]["token_logprobs"][0] -= 0.5
        batch.append(encode(chunk))
        if len(batch) == 64:
            yield b"".join(batch)
            batch = []
    final = completion_chunk(tokens)
    final["choices"][0].update(text="", logprobs=None, finish_reason="length")
    final["nvext"] = {"completion_token_ids": []}
    final["usage"] = {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": tokens + 5}
    yield b"".join([*batch, encode(final), encode("[DONE]")])


def expected_ids(tokens: int) -> array[int]:
    return array("q", ((i * 7919 + 13) % VOCABULARY for i in range(tokens)))


def judge(exchange: Any, ids: array[int]) -> list[Any]:
    """The stream's verdicts from the exchange's fold: terminal state, one terminal, nothing
    after it, [DONE] last, ids concatenation, logprob alignment and range."""
    from rl_conformance.checks import logprobs, streaming, tokens

    fold = exchange.fold
    state = exchange.state.value if exchange.state is not None else "none"
    return [
        streaming.terminal_success(state, exchange.state_reason),
        streaming.single_terminal(fold),
        streaming.nothing_after_terminal(fold),
        streaming.done_last(fold),
        tokens.stream_concat(fold, ids),
        logprobs.selected_alignment(fold, ids),
        logprobs.finite_nonpositive(fold),
    ]


def stream_once(url: str, tokens: int, measure: bool, quiet: bool = False, **faults: int) -> None:
    from rl_conformance.client.http import Client

    ids = expected_ids(tokens)
    body = {"model": "Qwen/Qwen3-8B", "max_tokens": tokens, **faults}
    with Client(deadline_s=300) as client:
        gc.collect()
        if measure:
            tracemalloc.start()
        started = time.perf_counter()
        exchange = client.stream("POST", url, json_body=body)
        streamed = time.perf_counter() - started
        results = judge(exchange, ids)
        judged = time.perf_counter() - started - streamed
        peak = tracemalloc.get_traced_memory()[1] if measure else 0
        tracemalloc.stop()
    if quiet:
        return
    print(
        f"   {tokens:>7,} tokens: {exchange.event_count:,} events "
        f"({len(exchange.events):,} kept, {exchange.events_elided:,} elided), "
        f"{exchange.stream_bytes / 1e6:.1f} MB in {streamed:.2f} s "
        f"({exchange.event_count / streamed:,.0f} events/s); judged in {judged * 1000:.0f} ms"
    )
    verdicts = ", ".join(f"{r.check_id} {'pass' if r.passed else 'FAIL'}" for r in results)
    print(f"       {verdicts}")
    for result in results:
        for violation in result.violations:
            print(f"         {result.check_id}: {violation.message}")
    if measure:
        held = exchange.fold.nbytes
        print(
            f"       tracemalloc peak {peak / 1e6:.2f} MB: folded ids and logprobs "
            f"{held / 1e6:.2f} MB, the rest {(peak - held) / 1e6:.2f} MB"
        )


def bench_stream(quick: bool) -> None:
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}/v1/completions"
        print(f"\n3. one-token chunks over HTTP from 127.0.0.1:{port}, through Client.stream")
        stream_once(url, 100, measure=False, quiet=True)  # first-use imports and caches
        for tokens in (10_000, 100_000):
            stream_once(url, tokens, measure=True)
        if not quick:
            print("   with a wrong token id at 61,234 and a shifted logprob at 77,777:")
            stream_once(url, 100_000, measure=False, swap_id_at=61_234, shift_logprob_at=77_777)
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer runs and events")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=9, help="discovery runs (default 9)")
    parser.add_argument(
        "--reference", action="store_true", help="also time the schema on jsonschema alone (~4 s)"
    )
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    started = time.perf_counter()
    bench_discovery(3 if args.quick else args.repeat, args.reference)
    bench_sse(args.quick)
    bench_stream(args.quick)
    print(f"\n(total {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
