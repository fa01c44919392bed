"""Instructions our fake vLLM deployment spends on one request, counted under valgrind.

Wall-clock figures on a shared machine can move by a third from one minute to the next; an
instruction count does not (to about 0.1%), so this is the figure to compare two versions of the
fake by. The fake is started under `valgrind --tool=cachegrind --cache-sim=no`, sent a batch of
requests (the same load generator as `fake_throughput.py`), stopped, and its instruction total
read; a run with `--warm-up` requests is subtracted from one with `--warm-up + --requests`, so
start-up and first-use work (tables built at the first request) cancel out.

Prints instructions per request, for streamed (`--streams` at once, in batches of at most 200)
and for non-streamed 16-token completions (one at a time). Asserts nothing. Needs valgrind
(`apt-get install valgrind`); about a minute. Usage: python benchmarks/fake_instructions.py
[--requests N] [--warm-up N] [--python-path DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the load generator's module

import fake_throughput

from rl_conformance.launchers.fake import FakeLauncher

BATCH = 200
TOTAL = re.compile(r"I\s+refs:\s+([\d,]+)")


Send = Callable[[fake_throughput.Deployment, int], Awaitable[fake_throughput.Batch]]


async def one_at_a_time(deployment: fake_throughput.Deployment, count: int) -> Any:
    """`count` non-streamed completions on one keep-alive connection, one after another."""
    async with fake_throughput.RawConnection(deployment.url) as connection:
        correct = 0
        for _ in range(count):
            answer = await connection.post(deployment.body(stream=False))
            correct += fake_throughput.raw_unary_correct(*answer)
    return fake_throughput.Batch(0.0, count, correct)


def instructions(requests: int, send: Send, python_path: str) -> int:
    """The fake's instruction total over its whole life, having served `requests` requests."""
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "valgrind.log"
        env = dict(os.environ, PYTHONHASHSEED="0")
        if python_path:
            env["PYTHONPATH"] = python_path
        process = subprocess.Popen(
            [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                "--cachegrind-out-file=/dev/null",
                f"--log-file={log}",
                *FakeLauncher("vllm").command(),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=scratch,  # not this checkout: `python -m` would import from the working directory
        )
        try:
            assert process.stdout is not None
            ready = json.loads(process.stdout.readline())
            target = SimpleNamespace(frontend_url=ready["frontend"], model=ready["model"])
            deployment = fake_throughput.Deployment("fake vllm", None, target)  # type: ignore[arg-type]

            async def load() -> None:
                done = 0
                while done < requests:
                    batch = await send(deployment, min(BATCH, requests - done))
                    if batch.correct != batch.sent:
                        raise SystemExit(f"{batch.sent - batch.correct} incorrect answers")
                    done += batch.sent

            asyncio.run(load())
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
        found = TOTAL.search(log.read_text())
        if found is None:
            raise SystemExit(f"no instruction total in valgrind's log:\n{log.read_text()[-2000:]}")
        return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=400, help="requests counted (default 400)")
    parser.add_argument("--warm-up", type=int, default=50, help="requests subtracted (default 50)")
    parser.add_argument(
        "--python-path", default="", help="PYTHONPATH of the fake (another checkout to compare)"
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    kinds: dict[str, Send] = {
        f"streamed, at most {BATCH} at once": fake_throughput.raw_streams,
        "non-streamed, one at a time": one_at_a_time,
    }
    print(f"fake vllm, 16-token completions; {args.requests} requests counted per figure")
    for title, send in kinds.items():
        warm = instructions(args.warm_up, send, args.python_path)
        loaded = instructions(args.warm_up + args.requests, send, args.python_path)
        print(f"  {title}: {(loaded - warm) / args.requests:,.0f} instructions per request")


if __name__ == "__main__":
    main()
