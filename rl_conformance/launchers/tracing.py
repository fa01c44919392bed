"""The frontend's request trace, turned on for a launched deployment as a user would turn it on
(the `DYN_REQUEST_TRACE*` variables of Dynamo's request-trace reference): payload and end rows,
the `X-RL-*` headers captured, one plain JSONL file flushed every 200 ms. Our fakes read the same
variables."""

from __future__ import annotations

from pathlib import Path

from ..checks.trace import HEADERS

REQUEST_TRACE_FILE = "request-trace.jsonl"


def request_trace_environment(path: Path) -> dict[str, str]:
    return {
        "DYN_REQUEST_TRACE": "1",
        "DYN_REQUEST_TRACE_RECORDS": "request_end,request_payload",
        "DYN_REQUEST_TRACE_SINKS": "file",
        "DYN_REQUEST_TRACE_FILE_FORMAT": "jsonl",
        "DYN_REQUEST_TRACE_FILE_PATH": str(path),
        "DYN_REQUEST_TRACE_FILE_FLUSH_INTERVAL_MS": "200",
        "DYN_REQUEST_TRACE_HTTP_HEADER_CAPTURE_LIST": ",".join(HEADERS),
    }
