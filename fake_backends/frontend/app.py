"""The Dynamo frontend's HTTP surface: OpenAI-compatible routes, health, models, metrics.

This module only wires HTTP to the other modules: it checks the content type, reads the
body, checks the model, resolves a pinned worker, and hands the request to a
``LiveRequest`` (routing, admission, token release, ledger) and then to the completions,
chat or SGLang renderer.  Behaviour follows the recordings of the real 1.6.1 frontend
where they speak: a JSON body needs ``content-type: application/json`` (415 otherwise);
with no worker registered there is no model, so the generation routes answer 404 with an
empty body and ``/v1/models`` lists nothing; ``/health`` is healthy regardless; a client
``x-request-id`` is echoed on every response.  The frontend knows nothing about pauses: a
request routed to a paused worker simply waits (CONTRACT-NOTES §O6.17), no 503.

Streaming requests commit their 200 at once and do everything else inside the stream; a
non-streaming request is raced against its client's disconnect.  Either way a client that
goes away cancels its request (``flow``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import json
import math
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fake_backends.encoding.replies import cut_json_response, json_response
from fake_backends.frontend.error_bodies import (
    FrontendError,
    error_response,
    flat_error_body,
    not_ready,
    shape_error,
)
from fake_backends.frontend.flow import (
    TOKEN_DELAY_HEADER,
    LiveRequest,
    LiveStreamResponse,
    ignores_disconnects,
    round_robin,
    unless_disconnected,
)
from fake_backends.frontend.nvext import NvextRequest
from fake_backends.frontend.render.chat import chat_body, chat_stream
from fake_backends.frontend.render.completions import completion_body, completion_stream
from fake_backends.frontend.requests import (
    GenerationRequest,
    ensure_served_model,
    parse_chat_request,
    parse_completion_request,
    refuse_beyond_vocabulary,
)
from fake_backends.frontend.runs import EngineRun, Received, run_request, truncate_run
from fake_backends.frontend.sglang_native import SglangEvents, SglangRequest, parse_sglang_request
from fake_backends.runtime.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from fake_backends.runtime.state import DeploymentState
from fake_backends.runtime.workers import COMPONENT, GENERATE_ENDPOINT, RL_ENDPOINT, EngineWorker

NATIVE_TOKEN_INTERVAL_S = 0.004
"""SGLang's native stream sends one cumulative event per token, each larger than the last: the
fake sends them at 250 a second (a small model's pace), so that a control step taken after the
first event lands while a long stream is still generating, even on a loaded machine."""
PIN_HEADERS = ("x-dynamo-worker-instance-id", "x-worker-instance-id")
CONTEXT_WINDOW = 4096
OPENAPI_TITLE = "fake_backends: a fake Dynamo frontend (dynamo-rl-conformance)"
"""Not Dynamo's title (the real 1.6.1 frontend's is "NVIDIA Dynamo OpenAI Frontend", version
1.6.1): a fake never claims to be the release it imitates."""
JSON_CONTENT_TYPE_MESSAGE = "Expected request with Content-Type application/json"

Reply = Response | LiveStreamResponse
Handler = Callable[[Request], Awaitable[Reply]]
T = TypeVar("T")
CLIENT_CLOSED = 499  # nobody reads it: the client is gone


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# ``json.loads(raw, parse_constant=...)`` without building a decoder per request.
_JSON_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


async def read_json(request: Request) -> Any:
    """The body as JSON, with axum's ``Json`` extractor rules (content type, then syntax)."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not (content_type == "application/json" or content_type.endswith("+json")):
        raise FrontendError(415, JSON_CONTENT_TYPE_MESSAGE)
    raw = await request.body()
    try:
        return _JSON_DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise shape_error(str(exc)) from None


def _check_model_first(state: DeploymentState, body: Any) -> None:
    """An unknown model is a 404 before any other validation of SGLang's native route (the
    OpenAI routes validate first: `frontend/validation.py`)."""
    if isinstance(body, Mapping) and isinstance(body.get("model"), str):
        ensure_served_model(body["model"], state.model_name)


def _require_model(state: DeploymentState) -> None:
    """No worker means no registered model: the generation routes are simply not there. Workers
    that all unregistered their generate endpoint (paused native sidecars) leave the model
    listed nowhere and not ready: 503 at once, streams included (recorded:
    ``vllm-sidecar/completion_while_paused.json``)."""
    if not state.workers:
        raise FrontendError(404, "", empty=True)
    if not state.router.any_registered():
        raise not_ready(state.model_name)


def _header_pin(request: Request) -> int | None:
    for name in PIN_HEADERS:
        value = request.headers.get(name)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                raise shape_error(f"{name} must be an integer instance id") from None
    return None


def pinned_worker(state: DeploymentState, pinned: int | None) -> EngineWorker | None:
    """The worker a request pins, None when it pins none; 503 for an unknown instance."""
    if pinned is None:
        return None
    worker = state.router.find(pinned)
    if worker is None or not worker.runtime.registered:
        raise FrontendError(503, "Service temporarily unavailable")
    return worker


def _guarded(handler: Handler, state: DeploymentState, endpoint: str | None = None) -> Handler:
    """Render ``FrontendError``; count refused generation requests in the metrics."""

    async def wrapped(request: Request) -> Reply:
        started = time.perf_counter()
        try:
            return await handler(request)
        except FrontendError as error:
            if endpoint is not None:
                state.metrics.request_finished(
                    model=state.model_name,
                    endpoint=endpoint,
                    status="error",
                    duration_s=time.perf_counter() - started,
                )
            return error_response(error)

    return wrapped


def _pin_for(request: Request, nvext: NvextRequest) -> int | None:
    header = _header_pin(request)
    return header if header is not None else nvext.pinned_instance


def input_token_estimate(value: Any) -> int:
    """The frontend's character heuristic for ``/v1/responses/input_tokens``.

    Not real tokenization (CONTRACT-NOTES §U3.3).  The exact 1.6.1 formula is unknown; a third of
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
        "namespace": worker.namespace,
        "instance_id": worker.instance_id,
        "transport": worker.transport(endpoint),
        "device_type": "cuda",
        "request_plane_codec": "msgpack",
    }


async def _unary_run(
    live: LiveRequest, compute: Callable[[EngineWorker, int], EngineRun]
) -> EngineRun:
    """Release every token of a non-streaming run; a truncated run if it was aborted."""
    with live.outcome_guard():
        run = await live.start(compute, lambda r: r.total_tokens)
        released = dict.fromkeys(range(len(run.choices)), 0)
        for position in round_robin([len(c.steps) for c in run.choices]):
            if not await live.step():
                live.end("aborted")
                return truncate_run(run, released)
            released[position] += 1
        live.end("completed", run.choices[0].token_ids if run.choices else ())
        return run


async def _streamed(
    live: LiveRequest,
    compute: Callable[[EngineWorker, int], T],
    tokens: Callable[[T], int],
    render: Callable[[T], AsyncIterator[bytes]],
) -> AsyncGenerator[bytes, None]:
    """Start the request inside the stream, then relay the renderer's frames."""
    with live.outcome_guard():
        result = await live.start(compute, tokens)
        frames = render(result)
        async with contextlib.aclosing(frames) as closing:  # type: ignore[type-var]
            async for item in closing:
                yield item


def build_frontend_app(state: DeploymentState, extra_routes: Sequence[Route] = ()) -> ASGIApp:
    """The frontend ASGI app of one deployment; `extra_routes` come from the deployment that
    composes it (the frontend knows nothing of the other apps)."""
    endpoints = (
        [GENERATE_ENDPOINT, RL_ENDPOINT] if state.personality.rl_workers else [GENERATE_ENDPOINT]
    )

    def live_request(
        request: Request,
        endpoint: str,
        response_id: str,
        prompt: Any,
        pin: int | None,
        *,
        stream: bool,
    ) -> LiveRequest:
        pinned = pinned_worker(state, pin)
        return LiveRequest(
            state,
            request,
            endpoint=endpoint,
            model_label=state.model_name,
            response_id=response_id,
            prompt_ids=prompt,
            pinned=pinned,
            stream=stream,
        )

    async def openai_route(
        request: Request,
        parse: Callable[[Any], GenerationRequest],
        prefix: str,
        endpoint: str,
        stream: Callable[[DeploymentState, EngineRun, LiveRequest], AsyncIterator[bytes]],
        body_of: Callable[[DeploymentState, EngineRun], dict[str, Any]],
        unary: Callable[[dict[str, Any]], Response] = json_response,
    ) -> Reply:
        received = Received.now()
        _require_model(state)
        body = await read_json(request)
        parsed = parse(body)  # the frontend's validation, then the model, then the engine's
        refuse_beyond_vocabulary(body, state.vocabulary)
        response_id = f"{prefix}-{uuid.uuid4()}"
        pin = _pin_for(request, parsed.nvext)
        live = live_request(
            request, endpoint, response_id, parsed.prompt_ids, pin, stream=parsed.stream
        )
        if endpoint == "chat_completions":
            live.traced_request = body

        def compute(worker: EngineWorker, cached: int) -> EngineRun:
            return run_request(state, parsed, worker, received, response_id, cached)

        ignore = ignores_disconnects(state)
        if parsed.stream and not state.faults.active("stream_answered_unary"):
            frames = _streamed(
                live, compute, lambda r: r.total_tokens, lambda r: stream(state, r, live)
            )
            return LiveStreamResponse(frames, ignore_disconnect=ignore, on_close=live.abandon)
        run = await unless_disconnected(request.receive, _unary_run(live, compute), ignore=ignore)
        if run is None:
            live.abandon()  # in case the work was cancelled before it even started
            return Response(status_code=CLIENT_CLOSED)
        return unary(body_of(state, run))

    async def completions(request: Request) -> Reply:
        def parse(body: Any) -> GenerationRequest:
            return parse_completion_request(
                body,
                bos_on_text=state.faults.active("text_prompt_differs"),
                single_choice_ids=not state.faults.active("validation_accepted"),
                wrap_ids=state.faults.active("token_ids_wrapped"),
                check_context=not state.faults.active("context_window_unchecked"),
                plays_1_6=state.plays_1_6(),
                faults=state.faults,
                served=state.model_name,
                engine=state.personality.name,
            )

        return await openai_route(
            request, parse, "cmpl", "completions", completion_stream, completion_body
        )

    def chat_response(body: dict[str, Any]) -> Response:
        if state.faults.active("invalid_json_body"):
            return cut_json_response(body)
        return json_response(body)

    async def chat(request: Request) -> Reply:
        return await openai_route(
            request,
            functools.partial(
                parse_chat_request,
                plays_1_6=state.plays_1_6(),
                faults=state.faults,
                served=state.model_name,
                engine=state.personality.name,
            ),
            "chatcmpl",
            "chat_completions",
            chat_stream,
            chat_body,
            chat_response,
        )

    async def sglang_generate(request: Request) -> Reply:
        _require_model(state)
        body = await read_json(request)
        _check_model_first(state, body)
        parsed = parse_sglang_request(body, wrap_ids=state.faults.active("token_ids_wrapped"))
        native: SglangRequest = dataclasses.replace(parsed, rid=parsed.rid or str(uuid.uuid4()))
        assert native.rid is not None
        pin = _header_pin(request)
        live = live_request(request, "generate", native.rid, native.prompt, pin, stream=True)
        if request.headers.get(TOKEN_DELAY_HEADER) is None:
            live.token_delay_s, live.burst = NATIVE_TOKEN_INTERVAL_S, 1

        def compute(worker: EngineWorker, cached: int) -> SglangEvents:
            return SglangEvents(state, worker, native, cached_tokens=cached)

        frames = _streamed(live, compute, lambda e: e.token_count, lambda e: e.frames(live))
        return LiveStreamResponse(
            frames, ignore_disconnect=ignores_disconnects(state), on_close=live.abandon
        )

    async def input_tokens(request: Request) -> Response:
        body = await read_json(request)
        if not isinstance(body, Mapping):
            raise shape_error("invalid type: expected a JSON object")
        _check_model_first(state, body)
        count = input_token_estimate(body.get("input"))
        if state.faults.active("input_tokens_negative"):
            count = -1
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
        listed = state.workers and state.router.any_registered()
        return json_response({"object": "list", "data": cards if listed else []})

    async def health(request: Request) -> Response:
        live = endpoints if state.workers else []
        namespaces = list(dict.fromkeys(w.namespace for w in state.workers))
        body = {
            "status": "healthy",
            "endpoints": [f"dyn://{ns}.{COMPONENT}.{e}" for ns in namespaces for e in live],
            "instances": [
                _instance(w, e)
                for w in state.workers
                for e in live
                if e != GENERATE_ENDPOINT or state.router.in_discovery(w)
            ],
        }
        return json_response(body)

    async def live_route(request: Request) -> Response:
        return json_response({"status": "live", "message": "Service is live"})

    async def metrics(request: Request) -> Response:
        text = state.metrics.render([state.model_name])
        return Response(text, headers={"content-type": METRICS_CONTENT_TYPE})

    async def openapi(request: Request) -> Response:
        # The real frontend publishes its OpenAPI document, `info.version` its release.
        paths: dict[str, Any] = {route.path: {} for route in routes}
        document = {
            "openapi": "3.1.0",
            "info": {"title": OPENAPI_TITLE, "version": fake_version()},
            "paths": paths,
        }
        return json_response(document)

    generation = {
        "/v1/completions": _guarded(completions, state, "completions"),
        "/v1/chat/completions": _guarded(chat, state, "chat_completions"),
    }
    if state.personality.native_generate:
        generation["/generate"] = _guarded(sglang_generate, state, "generate")
    routes = [
        *(Route(path, handler, methods=["POST"]) for path, handler in generation.items()),
        Route("/v1/responses/input_tokens", _guarded(input_tokens, state), methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/live", live_route, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        *extra_routes,
    ]
    others = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_exception, Exception: _internal_error},
    )
    return EchoRequestId(GenerationFirst(generation, others), state)


def fake_version() -> str:
    """The version of the distribution the fakes ship in, or `in-tree` from a checkout."""
    try:
        return importlib.metadata.version("dynamo-rl-conformance")
    except importlib.metadata.PackageNotFoundError:
        return "in-tree"


class GenerationFirst:
    """The frontend's dispatch: a generation POST goes straight to its handler, every other
    request through the Starlette app (routing, 404/405, exception handlers).

    Why: under load the generation routes are nearly all the traffic, and a router, an
    exception middleware and their per-message ``send`` wrappers cost a fake stream about as
    much as its own work.  A handler's ``FrontendError`` is already rendered (``_guarded``);
    any other exception answers 500 in Dynamo's shape and is re-raised for the server to log,
    as Starlette's error middleware does.
    """

    def __init__(self, generation: Mapping[str, Handler], others: ASGIApp) -> None:
        self.generation = generation
        self.others = others

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = None
        if scope["type"] == "http" and scope["method"] == "POST":
            handler = self.generation.get(scope["path"])
        if handler is None:
            await self.others(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            response = await handler(request)
        except Exception as exc:
            await (await _internal_error(request, exc))(scope, receive, send)
            raise
        await response(scope, receive, send)


class EchoRequestId:
    """Echo a client's ``x-request-id`` on the response, JSON and SSE alike (recorded).

    The ``request_id_not_echoed`` fault drops the echo.
    """

    def __init__(self, app: ASGIApp, state: DeploymentState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.state.faults.active("request_id_not_echoed"):
            await self.app(scope, receive, send)
            return
        echoed = [(k, v) for k, v in scope["headers"] if k.lower() == b"x-request-id"][:1]
        if not echoed:  # nothing to echo: the response goes out untouched
            await self.app(scope, receive, send)
            return

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
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
