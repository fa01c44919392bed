"""The Dynamo frontend's HTTP surface: OpenAI-compatible routes, health, models.

This module only wires HTTP to the other modules: it checks the content type, reads the
body, checks the model, picks a worker, runs the engine and hands the run to the
completions, chat or SGLang renderer.  Behaviour follows the recordings of the real 1.6.1
frontend where they speak: a JSON body needs ``content-type: application/json`` (415
otherwise); with no worker registered there is no model, so the generation routes
answer 404 with an empty body and ``/v1/models`` lists nothing; ``/health`` is healthy
regardless; a client ``x-request-id`` is echoed on every response.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fake_backends.chat import chat_response
from fake_backends.completions import completion_response
from fake_backends.engine import EngineRun, Received, run_request
from fake_backends.errors import FrontendError, error_response, flat_error_body, shape_error
from fake_backends.nvext import NvextRequest
from fake_backends.openai_requests import (
    GenerationRequest,
    ensure_served_model,
    parse_chat_request,
    parse_completion_request,
)
from fake_backends.sglang_native import sglang_generate_response
from fake_backends.state import DeploymentState
from fake_backends.wire import json_response
from fake_backends.workers import (
    COMPONENT,
    GENERATE_ENDPOINT,
    NAMESPACE,
    RL_ENDPOINT,
    EngineWorker,
)

PIN_HEADERS = ("x-dynamo-worker-instance-id", "x-worker-instance-id")
CONTEXT_WINDOW = 4096
JSON_CONTENT_TYPE_MESSAGE = "Expected request with Content-Type application/json"

Handler = Callable[[Request], Awaitable[Response]]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


async def read_json(request: Request) -> Any:
    """The body as JSON, with axum's ``Json`` extractor rules (content type, then syntax)."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not (content_type == "application/json" or content_type.endswith("+json")):
        raise FrontendError(415, JSON_CONTENT_TYPE_MESSAGE)
    raw = await request.body()
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise shape_error(str(exc)) from None


def _check_model_first(state: DeploymentState, body: Any) -> None:
    """An unknown model is a 404 before any other validation (model lookup comes first)."""
    if isinstance(body, Mapping) and isinstance(body.get("model"), str):
        ensure_served_model(body["model"], state.model_name)


def _require_model(state: DeploymentState) -> None:
    """No worker means no registered model: the generation routes are simply not there."""
    if not state.workers:
        raise FrontendError(404, "", empty=True)


def _header_pin(request: Request) -> int | None:
    for name in PIN_HEADERS:
        value = request.headers.get(name)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                raise shape_error(f"{name} must be an integer instance id") from None
    return None


def pick_worker(state: DeploymentState, pinned: int | None) -> EngineWorker:
    worker = state.router.pick(pinned)
    if worker is None:
        raise FrontendError(503, "Service temporarily unavailable")
    return worker


def _guarded(handler: Handler) -> Handler:
    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except FrontendError as error:
            return error_response(error)

    return wrapped


def _pin_for(request: Request, nvext: NvextRequest) -> int | None:
    header = _header_pin(request)
    return header if header is not None else nvext.pinned_instance


def input_token_estimate(value: Any) -> int:
    """The frontend's character heuristic for ``/v1/responses/input_tokens``.

    Not real tokenization (facts §3.3).  The exact 1.6.1 formula is unknown; a third of
    the JSON text of ``input``, rounded up, matches the one recorded value
    (``"hello world"`` -> 5).
    """
    if not isinstance(value, str | list):
        raise shape_error("input: data did not match any variant of untagged enum Input")
    return math.ceil(len(json.dumps(value, ensure_ascii=False)) / 3)


def _instance(worker: EngineWorker, endpoint: str) -> dict[str, Any]:
    return {
        "component": COMPONENT,
        "endpoint": endpoint,
        "namespace": NAMESPACE,
        "instance_id": worker.instance_id,
        "transport": worker.transport(endpoint),
        "device_type": "cuda",
        "request_plane_codec": "msgpack",
    }


def build_frontend_app(state: DeploymentState) -> Starlette:
    """The frontend ASGI app of one deployment."""
    endpoints = (
        [GENERATE_ENDPOINT, RL_ENDPOINT] if state.personality.rl_workers else [GENERATE_ENDPOINT]
    )

    async def generate(
        request: Request, parse: Callable[[Any], GenerationRequest], prefix: str
    ) -> EngineRun:
        received = Received.now()
        _require_model(state)
        body = await read_json(request)
        _check_model_first(state, body)
        parsed = parse(body)
        worker = pick_worker(state, _pin_for(request, parsed.nvext))
        return run_request(state, parsed, worker, received, f"{prefix}-{uuid.uuid4()}")

    async def completions(request: Request) -> Response:
        def parse(body: Any) -> GenerationRequest:
            return parse_completion_request(body, bos_on_text=state.fault("text_prompt_differs"))

        return completion_response(state, await generate(request, parse, "cmpl"))

    async def chat(request: Request) -> Response:
        return chat_response(state, await generate(request, parse_chat_request, "chatcmpl"))

    async def sglang_generate(request: Request) -> Response:
        _require_model(state)
        body = await read_json(request)
        _check_model_first(state, body)
        return sglang_generate_response(state, body, pick_worker(state, None))

    async def input_tokens(request: Request) -> Response:
        body = await read_json(request)
        if not isinstance(body, Mapping):
            raise shape_error("invalid type: expected a JSON object")
        _check_model_first(state, body)
        count = input_token_estimate(body.get("input"))
        return json_response({"object": "response.input_tokens", "input_tokens": count})

    async def models(request: Request) -> Response:
        cards = [
            {
                "id": state.model_name,
                "object": "model",
                "created": state.created,
                "owned_by": "nvidia",
                "context_window": CONTEXT_WINDOW,
            }
        ]
        return json_response({"object": "list", "data": cards if state.workers else []})

    async def health(request: Request) -> Response:
        live = endpoints if state.workers else []
        body = {
            "status": "healthy",
            "endpoints": [f"dyn://{NAMESPACE}.{COMPONENT}.{e}" for e in live],
            "instances": [_instance(w, e) for w in state.workers for e in live],
        }
        return json_response(body)

    async def live(request: Request) -> Response:
        return json_response({"status": "live", "message": "Service is live"})

    async def metrics(request: Request) -> Response:
        text = (
            "# HELP dynamo_frontend_active_requests Number of requests currently being handled"
            " by the frontend\n"
            "# TYPE dynamo_frontend_active_requests gauge\n"
            f'dynamo_frontend_active_requests{{model="{state.model_name}"}} 0\n'
        )
        return Response(text, headers={"content-type": "text/plain; charset=utf-8"})

    routes = [
        Route("/v1/completions", _guarded(completions), methods=["POST"]),
        Route("/v1/chat/completions", _guarded(chat), methods=["POST"]),
        Route("/v1/responses/input_tokens", _guarded(input_tokens), methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/live", live, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    if state.personality.native_generate:
        routes.append(Route("/generate", _guarded(sglang_generate), methods=["POST"]))
    return Starlette(
        routes=routes,
        middleware=[Middleware(EchoRequestId)],
        exception_handlers={HTTPException: _http_exception, Exception: _internal_error},
    )


class EchoRequestId:
    """Echo a client's ``x-request-id`` on the response, JSON and SSE alike (recorded)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        echoed = [(k, v) for k, v in scope["headers"] if k.lower() == b"x-request-id"][:1]

        async def send_with_id(message: Message) -> None:
            if echoed and message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *echoed]}
            await send(message)

        await self.app(scope, receive, send_with_id)


async def _internal_error(request: Request, exc: Exception) -> Response:
    """A bug in the fake still answers in Dynamo's shape (and is logged by uvicorn)."""
    return json_response(flat_error_body(500, "Internal server error"), 500)


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"Route not found: {request.method} {request.url.path}"
    else:
        message = exc.detail
    return json_response(flat_error_body(exc.status_code, message), exc.status_code, exc.headers)
