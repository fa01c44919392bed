"""Dynamo's error bodies and the exception that carries them through the handlers.

The real frontend does not use OpenAI's ``{"error": {...}}`` envelope for the OpenAI
routes: it answers ``{"message": str, "type": <HTTP reason phrase>, "code": int}``
(CONTRACT-NOTES §U4.5, recorded fixtures).  Messages come in two families, as recorded from 1.6.1:
body-shape problems (bad JSON, wrong types, unknown or missing fields) read
``Failed to deserialize the JSON body into the target type: ...``; semantic checks read
``Validation: ...``.  Handlers raise ``FrontendError`` and one place renders it.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from starlette.responses import Response

from fake_backends.encoding.replies import json_response

DESERIALIZE_PREFIX = "Failed to deserialize the JSON body into the target type: "


class FrontendError(Exception):
    """An error answered before any response byte was sent.

    ``body`` overrides the flat body for the few routes that answer in another shape
    (SGLang ``/generate``); ``empty`` answers with no body and no content type at all.
    """

    def __init__(
        self, status: int, message: str, *, body: dict[str, Any] | None = None, empty: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.body = body
        self.empty = empty


def not_ready(model: str) -> FrontendError:
    """503 for a model whose every worker unregistered (recorded 1.6.1 text)."""
    return FrontendError(
        503,
        f"Model `{model}` is not ready to serve requests yet. The deployment may still be "
        "starting up or is not fully provisioned. Please retry shortly.",
    )


def validation_error(message: str) -> FrontendError:
    """400 for a semantic check, with the ``Validation: `` prefix."""
    return FrontendError(400, f"Validation: {message}")


def shape_error(message: str) -> FrontendError:
    """400 for a body that does not deserialize (types, unknown or missing fields)."""
    return FrontendError(400, DESERIALIZE_PREFIX + message)


INVALID_REQUEST = "Invalid request"


def invalid_request(**details: Any) -> FrontendError:
    """400 ``Invalid request``: what 1.6.1 answers for a request the engine cannot take (a
    prompt token outside the vocabulary, a prompt beyond the context window), with the
    typed ``details`` object when Dynamo has one (``{"type": "context_length", "limit",
    "actual"}``). Recorded with real vLLM 0.31.0 (``vllm-cpu/completions_prompt_too_long``,
    ``completions_token_beyond_vocab``)."""
    body = flat_error_body(400, INVALID_REQUEST)
    if details:
        body["details"] = details
    return FrontendError(400, INVALID_REQUEST, body=body)


def flat_error_body(status: int, message: str) -> dict[str, Any]:
    return {"message": message, "type": HTTPStatus(status).phrase, "code": status}


def error_response(error: FrontendError) -> Response:
    if error.empty:
        return Response(status_code=error.status)
    body = error.body if error.body is not None else flat_error_body(error.status, error.message)
    return json_response(body, error.status)
