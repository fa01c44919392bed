"""A slow link between the suite and a frontend: a TCP proxy on loopback that forwards requests at
once and the frontend's replies late, as an ingress, a proxy or a congested network may (the spec
fixes no pace for a stream's events).

Three ways of being late, each legal:

- `delay`: every chunk of a reply leaves `delay_s` after it arrived (order kept);
- `rate`: a reply leaves at `bytes_per_s` (a congested network), so a stream faster than the
  link builds a backlog that keeps arriving, at the link's pace, long after the engine made it;
- `buffer`: a reply is held until `buffer_bytes` of it arrived, its first held byte waited
  `delay_s`, or it ended (a proxy that buffers event streams and flushes at an interval).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

MODES = ("delay", "rate", "buffer")
READ_BYTES = 65536


@dataclass(frozen=True)
class Lateness:
    mode: str = "delay"
    delay_s: float = 0.05
    buffer_bytes: int = 4096
    bytes_per_s: float = 64_000.0


async def _forward_requests(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Requests go at once; a client that leaves closes the frontend's connection, as a proxy
    tells the frontend its client went away."""
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(READ_BYTES):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(ConnectionError, OSError, RuntimeError):
        writer.close()


Chunks = asyncio.Queue[tuple[float, bytes]]
"""A reply's chunks as they arrived (when, what); an empty chunk ends it."""


async def _late(queue: Chunks, lateness: Lateness) -> AsyncIterator[bytes]:
    """`delay` and `rate`: each chunk when its time comes (at `bytes_per_s`, a chunk has gone
    once the bytes before it and its own have had their time)."""
    sent_until = 0.0
    while True:
        arrived, data = await queue.get()
        if lateness.mode == "rate":
            sent_until = max(sent_until, arrived) + len(data) / lateness.bytes_per_s
            due = sent_until
        else:
            due = arrived + lateness.delay_s
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        if not data:
            return
        yield data


async def _buffered(queue: Chunks, lateness: Lateness) -> AsyncIterator[bytes]:
    """`buffer`: what arrived, once `buffer_bytes` of it did, its first byte was held
    `delay_s` (a flush interval), or the reply ended."""
    pending, flush_at = b"", 0.0
    while True:
        try:
            left = None if not pending else max(0.0, flush_at - time.monotonic())
            arrived, data = await asyncio.wait_for(queue.get(), left)
        except TimeoutError:
            yield pending
            pending = b""
            continue
        if not pending:
            flush_at = arrived + lateness.delay_s
        pending += data
        if not data or len(pending) >= lateness.buffer_bytes:
            if pending:
                yield pending
            pending = b""
        if not data:
            return


async def _deliver(queue: Chunks, writer: asyncio.StreamWriter, lateness: Lateness) -> None:
    chunks = _buffered(queue, lateness) if lateness.mode == "buffer" else _late(queue, lateness)
    with contextlib.suppress(ConnectionError, OSError):
        async for data in chunks:
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(ConnectionError, OSError, RuntimeError):
        writer.close()


async def _forward_replies(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, lateness: Lateness
) -> None:
    """Read the frontend's reply as fast as it comes (the frontend never waits on the link) and
    hand it to the late delivery."""
    queue: Chunks = asyncio.Queue()
    delivery = asyncio.create_task(_deliver(queue, writer, lateness))
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(READ_BYTES):
            queue.put_nowait((time.monotonic(), data))
    queue.put_nowait((time.monotonic(), b""))
    await delivery


class SlowLink:
    """The proxy, serving from a thread of its own until the block ends: `url` reaches
    `upstream` (an `http://127.0.0.1:PORT` URL) through it."""

    def __init__(self, upstream: str, lateness: Lateness) -> None:
        if lateness.mode not in MODES:
            raise ValueError(f"lateness mode {lateness.mode!r}: expected one of {MODES}")
        host, _, port = upstream.removeprefix("http://").rstrip("/").partition(":")
        self.upstream = (host, int(port))
        self.lateness = lateness
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._connections: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    async def _connection(
        self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:  # held until it ends: a pending task is never collected
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(
            _forward_requests(client_r, up_w),
            _forward_replies(up_r, client_w, self.lateness),
        )
        with contextlib.suppress(ConnectionError, OSError):
            up_w.close()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", 0)
        )
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self._ready.set()
        self._loop.run_forever()
        server.close()

    def __enter__(self) -> SlowLink:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@contextlib.contextmanager
def slow_link(upstream: str, lateness: Lateness) -> Iterator[str]:
    with SlowLink(upstream, lateness) as link:
        yield link.url


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("upstream")
    parser.add_argument("--mode", choices=MODES, default="delay")
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--buffer-bytes", type=int, default=4096)
    parser.add_argument("--bytes-per-s", type=float, default=64_000.0)
    arguments = parser.parse_args()
    lateness = Lateness(
        arguments.mode, arguments.delay_ms / 1000, arguments.buffer_bytes, arguments.bytes_per_s
    )
    with slow_link(arguments.upstream, lateness) as url:
        print(url, flush=True)
        threading.Event().wait()
