"""JSON replies as the real frontend sends them (compact, bare NaN, exact big integers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import Response

from fake_backends.encoding.json_text import dumps

JSON_MEDIA_TYPE = "application/json"


def json_response(
    obj: Any, status_code: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        content=dumps(obj).encode("utf-8"),
        status_code=status_code,
        media_type=JSON_MEDIA_TYPE,
        headers=dict(headers or {}),
    )


def cut_json_response(obj: Any) -> Response:
    """200 ``application/json`` carrying only the first half of the JSON text of ``obj``.

    The ``invalid_json_body`` fault: a well-formed HTTP reply whose body does not parse.
    The cut is made between characters, so the body is still valid UTF-8.
    """
    text = dumps(obj)
    return Response(content=text[: len(text) // 2].encode("utf-8"), media_type=JSON_MEDIA_TYPE)
