"""The wire log: what was sent, what came back, and how to reproduce it with curl."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from ..redaction import REDACTOR
from .sse import SSEEvent
from .stream_state import DONE, StreamState

_BODY_PREVIEW = 300
WIRE_LOG_BYTES = 64 * 1024
"""A saved wire log keeps at most this much of a body, and events up to this many bytes."""
KEPT_EVENTS = 2048
"""A streamed exchange keeps every event up to this many; a longer stream keeps its first and
last halves of it (the rest is counted in `events_elided` and judged through `fold`)."""
STREAM_BODY_HEAD = 64 * 1024
"""A streamed exchange keeps this much of the raw stream, for previews; `stream_bytes` counts
all of it."""


class EventsElided(RuntimeError):
    """A check asked for every event of a stream whose middle the exchange did not keep."""


@dataclass(frozen=True)
class WireRequest:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None = None
    curl_options: tuple[str, ...] = ()
    """What curl needs besides the request to reach the deployment as the client did (its CA
    bundle, client certificate, proxy): the reproducer carries them."""

    def json(self) -> Any:
        return None if self.body is None else json.loads(self.body)


@dataclass
class Exchange:
    """One request and everything observed about its answer.

    `status` is None when no HTTP response arrived (`error` says why). For streams, `state` is
    the terminal state the client's machine reached, and `events` the dispatched SSE events: all
    of them up to `KEPT_EVENTS`; of a longer stream the first ones (`elided_at` of them) and the
    last ones, with `events_elided` counted between. `fold` (a `checks.stream_fold.StreamFold`)
    has folded every event: the stream checks judge a stream of any length from it. `body` keeps
    the first `STREAM_BODY_HEAD` bytes of a stream; `stream_bytes` counts them all. `body` and
    the stream are as decoded from the content coding `headers` name (`content-encoding`).
    """

    request: WireRequest
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    body_truncated: bool = False
    events: list[SSEEvent] = field(default_factory=list)
    state: StreamState | None = None
    state_reason: str = ""
    error: str | None = None
    elapsed_s: float = 0.0
    first_byte_s: float | None = None
    events_elided: int = 0
    elided_at: int = 0
    stream_bytes: int = 0
    fold: Any = None

    @property
    def streamed(self) -> bool:
        return self.state is not None

    @property
    def event_count(self) -> int:
        """Events the stream dispatched, kept or not."""
        return len(self.events) + self.events_elided

    def numbered_events(self) -> list[tuple[int, SSEEvent]]:
        """The kept events with their position in the stream."""
        if not self.events_elided:
            return list(enumerate(self.events))
        head = list(enumerate(self.events[: self.elided_at]))
        offset = self.events_elided
        return head + [
            (self.elided_at + offset + index, event)
            for index, event in enumerate(self.events[self.elided_at :])
        ]

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    def json(self) -> Any:
        """The body parsed as JSON; raises `BodyNotJSON` with a preview of what came instead."""
        return parse_json(self.body, what="response body")

    def payloads(self) -> list[Any]:
        """Parsed data of every event: JSON values, or the string `[DONE]` for the terminator.
        Raises `EventsElided` for a stream that was too long to keep whole: judge it through
        `fold` instead."""
        if self.events_elided:
            raise EventsElided(
                f"{self.event_count} events streamed; the exchange kept the first "
                f"{self.elided_at} and the last {len(self.events) - self.elided_at} "
                f"({self.events_elided} elided): judge the stream through exchange.fold"
            )
        parsed = []
        for position, event in enumerate(self.events):
            if event.data == DONE:
                parsed.append(DONE)
            else:
                parsed.append(parse_json(event.data.encode(), what=f"event {position}"))
        return parsed

    def body_preview(self) -> str:
        return preview(self.body)

    def reply(self) -> Any:
        """The body as JSON where it is JSON, else its preview: what a control call answered, for
        a finding to quote."""
        try:
            return self.json()
        except ValueError:
            return self.body_preview()

    def curl(self) -> str:
        """The request as a curl command; a credential stays a reference the shell expands
        (`-H "Authorization: Bearer $DYNAMO_TOKEN"`), so it replays once the variable is set."""
        parts = ["curl", "-sS"]
        if self.streamed:
            parts.append("-N")
        if self.headers.get("content-encoding", "identity") != "identity":
            parts.append("--compressed")  # the reply came coded: curl asks and decodes as we did
        parts += self.request.curl_options
        parts += ["-X", self.request.method, self.request.url]
        for name, value in self.request.headers.items():
            if name.lower() in {
                "host",
                "content-length",
                "accept-encoding",
                "connection",
                "user-agent",
                "accept",
            }:
                continue
            parts += ["-H", f"{name}: {value}"]
        if self.request.body is not None:
            parts += ["--data-raw", self.request.body.decode("utf-8", errors="replace")]
        return " ".join(REDACTOR.shell_word(part) for part in parts)

    def wire_log(self, limit: int = WIRE_LOG_BYTES) -> dict[str, Any]:
        """The exchange as saved next to the matrix for a failure: request, status, headers, body
        or SSE events, and timings, each body cut at `limit` bytes (and said so)."""

        def text(raw: bytes | None) -> str | None:
            if raw is None:
                return None
            shown = raw[:limit].decode("utf-8", errors="replace")
            return shown + (f"... [{len(raw) - limit} more bytes]" if len(raw) > limit else "")

        log: dict[str, Any] = {
            "request": {
                "method": self.request.method,
                "url": self.request.url,
                "headers": dict(self.request.headers),
                "body": text(self.request.body),
            },
            "status": self.status,
            "headers": dict(self.headers),
            "error": self.error,
            "elapsed_s": round(self.elapsed_s, 4),
            "first_byte_s": None if self.first_byte_s is None else round(self.first_byte_s, 4),
        }
        if self.streamed:
            shown = self._events_within(limit)
            omitted = self.event_count - len(shown)
            events: list[dict[str, Any]] = [
                {"event": event.event, "data": event.data} for _, event in shown
            ]
            if omitted:
                cut = next((at for at, (number, _) in enumerate(shown) if number != at), len(shown))
                events.insert(cut, {"data": f"... [{omitted} events elided]", "elided": omitted})
                log["events_elided"] = omitted
            log["events"] = events
            log["event_count"] = self.event_count
            log["stream_bytes"] = self.stream_bytes
            log["state"] = None if self.state is None else self.state.value
            log["state_reason"] = self.state_reason
        else:
            log["body"] = (text(self.body) or "") + (
                " [cut by the client]" if self.body_truncated else ""
            )
        log["reproducer"] = self.curl()
        return log

    def _events_within(self, limit: int) -> list[tuple[int, SSEEvent]]:
        """The numbered events a wire log shows: from the start while they fit in half of
        `limit` bytes, then from the end (where the terminal chunk and `[DONE]` are) while the
        rest fits."""
        numbered = self.numbered_events()
        if sum(len(event.data) for _, event in numbered) <= limit and not self.events_elided:
            return numbered
        head: list[tuple[int, SSEEvent]] = []
        used = 0
        for item in numbered:
            if used + len(item[1].data) > limit // 2:
                break
            head.append(item)
            used += len(item[1].data)
        tail: list[tuple[int, SSEEvent]] = []
        for item in reversed(numbered[len(head) :]):
            if used + len(item[1].data) > limit:
                break
            tail.append(item)
            used += len(item[1].data)
        return head + tail[::-1]

    def describe(self) -> str:
        """One line for messages: request, status and outcome."""
        line = f"{self.request.method} {self.request.url}"
        if self.status is None:
            return f"{line} -> no response ({self.error})"
        line += f" -> HTTP {self.status}"
        if self.state is not None:
            line += f", stream {self.state.value}"
            if self.state_reason:
                line += f" ({self.state_reason})"
        return line


SEQUENCE_KEPT = 64
"""A sequence's wire log keeps every exchange up to this many; of a longer one the first
quarter and the last three quarters of it, with the rest counted."""
SEQUENCE_BODY_BYTES = 16 * 1024
"""Each exchange of a sequence's wire log keeps at most this much of a body."""


def sequence_wire_log(exchanges: list[Exchange], reproducer: str | None = None) -> dict[str, Any]:
    """The wire log of a failure no single exchange shows (a refresh sequence, a feature found
    absent): every request of the test in order, each as `Exchange.wire_log` (bodies cut at
    `SEQUENCE_BODY_BYTES`), at most `SEQUENCE_KEPT` of them (`exchanges_elided` counts the
    rest), with the test's reproducer script."""
    kept: list[tuple[int, Exchange]] = list(enumerate(exchanges))
    elided = 0
    if len(kept) > SEQUENCE_KEPT:
        head = SEQUENCE_KEPT // 4
        elided = len(kept) - SEQUENCE_KEPT
        kept = kept[:head] + kept[head + elided :]
    steps = []
    for position, exchange in kept:
        step = exchange.wire_log(SEQUENCE_BODY_BYTES)
        step["position"] = position
        steps.append(step)
    log: dict[str, Any] = {"requests": len(exchanges), "sequence": steps}
    if elided:
        log["exchanges_elided"] = elided
    if reproducer is not None:
        log["reproducer"] = reproducer
    return log


class BodyNotJSON(ValueError):
    def __init__(self, what: str, detail: str, raw: bytes) -> None:
        self.what = what
        self.detail = detail
        self.raw = raw
        super().__init__(f"{what}: expected JSON, observed {preview(raw)!r} ({detail})")


def parse_json(raw: bytes, *, what: str) -> Any:
    """Parse JSON as the Python reference decoder does (NaN/Infinity accepted, so that a
    non-finite logprob reaches the checks that name it instead of failing as generic bad JSON)."""
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BodyNotJSON(what, str(exc), raw) from exc


def preview(raw: bytes, limit: int = _BODY_PREVIEW) -> str:
    text = raw[:limit].decode("utf-8", errors="replace")
    return text if len(raw) <= limit else text + f"... ({len(raw)} bytes)"


def shorten(text: str, limit: int) -> str:
    """`text` on one line, cut to at most `limit` characters between two words, never inside
    one, and marked " ..." where cut; a first word longer than `limit` is kept whole."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line.rfind(" ", 0, limit - 3)
    if cut <= 0:
        cut = line.find(" ", limit - 3)
        if cut < 0:
            return line
    return line[:cut].rstrip(" ,;:") + " ..."


def to_jsonable(value: Any) -> Any:
    """Make evidence safe for a JSON report: non-finite floats become strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(item) for item in value]
    if isinstance(value, bytes):
        return preview(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def without_keys(value: Any, keys: frozenset[str] | set[str]) -> Any:
    """`value` with every object member named in `keys` removed, at any depth: two responses
    compared once the fields that differ on every request (ids, timestamps) are set aside."""
    if isinstance(value, dict):
        return {k: without_keys(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [without_keys(v, keys) for v in value]
    return value
