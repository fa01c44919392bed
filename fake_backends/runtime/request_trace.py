"""The frontend's request trace, configured by the same variables as the real one.

``DYN_REQUEST_TRACE`` turns it on; ``DYN_REQUEST_TRACE_RECORDS`` picks ``request_end`` and/or
``request_payload`` rows (default ``request_end``); ``DYN_REQUEST_TRACE_FILE_PATH`` is the file
(default ``/tmp/dynamo-request-trace``); ``DYN_REQUEST_TRACE_HTTP_HEADER_CAPTURE_LIST`` names the
headers captured on payload rows (case-insensitive). Only the ``file`` sink in plain ``jsonl``
is served: a row per line, wrapped as the 1.6.1 file sink wraps it
(``{"timestamp": ms since start, "event": row}``), written and flushed at once. As observed on
the real 1.6.1 frontend, payload rows exist for chat completions only (``openai.chat_completion``),
and every generation request that reached a worker gets an end row.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SCHEMA = "dynamo.request.trace.v1"
DEFAULT_PATH = "/tmp/dynamo-request-trace"
TRUTHY = {"1", "true", "yes", "on"}


class RequestTrace:
    def __init__(self, path: Path, records: frozenset[str], capture: frozenset[str]) -> None:
        self.path = path
        self.records = records
        self.capture = capture
        self._started = time.monotonic()
        self._lock = threading.Lock()

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> RequestTrace | None:
        if env.get("DYN_REQUEST_TRACE", "").strip().lower() not in TRUTHY:
            return None
        records = frozenset(
            word.strip()
            for word in env.get("DYN_REQUEST_TRACE_RECORDS", "request_end").split(",")
            if word.strip()
        )
        listed = env.get("DYN_REQUEST_TRACE_HTTP_HEADER_CAPTURE_LIST", "")
        capture = frozenset(name.lower() for name in re.split(r"[,\s]+", listed) if name)
        path = Path(env.get("DYN_REQUEST_TRACE_FILE_PATH") or DEFAULT_PATH)
        return cls(path, records, capture)

    def captured(self, headers: Mapping[str, str]) -> dict[str, str]:
        return {
            name.lower(): value
            for name, value in headers.items()
            if name.lower() in self.capture and value
        }

    def payload(
        self,
        request_id: str,
        model: str,
        request: Any,
        headers: Mapping[str, str],
        *,
        complete: bool,
    ) -> None:
        if "request_payload" not in self.records:
            return
        payload: dict[str, Any] = {
            "request_id": request_id,
            "endpoint": "openai.chat_completion",
            "model": model,
            "request": request,
            "payload_complete": complete,
        }
        if not complete:
            payload["payload_drop_reason"] = "client_disconnected"
        if headers:
            payload["http_request_headers"] = dict(headers)
        self._write(
            {
                "schema": SCHEMA,
                "event_type": "request_payload",
                "event_time_unix_ms": _now_ms(),
                "event_source": "dynamo",
                "payload": payload,
            }
        )

    def end(
        self,
        request_id: str,
        *,
        input_tokens: int,
        output_tokens: int,
        received_ms: int,
        worker_id: int | None,
    ) -> None:
        if "request_end" not in self.records:
            return
        now = _now_ms()
        request: dict[str, Any] = {
            "request_id": request_id,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "request_received_ms": received_ms,
            "total_time_ms": float(now - received_ms),
        }
        if worker_id is not None:
            request["worker"] = {"prefill_worker_id": worker_id, "decode_worker_id": worker_id}
        self._write(
            {
                "schema": SCHEMA,
                "event_type": "request_end",
                "event_time_unix_ms": now,
                "request": request,
            }
        )

    def _write(self, row: dict[str, Any]) -> None:
        line = json.dumps(
            {"timestamp": int((time.monotonic() - self._started) * 1000), "event": row},
            separators=(",", ":"),
        )
        with self._lock, self.path.open("a", encoding="utf-8") as sink:
            sink.write(line + "\n")


def _now_ms() -> int:
    return int(time.time() * 1000)
