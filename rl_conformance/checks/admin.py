"""Worker administration: negotiated routes and success semantics per backend family."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .base import MISSING, Findings, Violation, check, describe, get_path

SECTION = "Compare vLLM and SGLang Administration"
VLLM_SUCCESS = frozenset({"ok", "success"})


@check(
    "admin.route_negotiation",
    title="an administered worker advertises a system_url and every route the update path needs",
    spec="Refresh discovery before each control phase and require the complete capability set "
    "for the selected update path.",
    section="Discover Workers Safely",
)
def route_negotiation(worker: Any, required: Iterable[str]) -> Findings:
    label = f"worker {get_path(worker, 'instance_id')}"
    if not isinstance(get_path(worker, "system_url"), str):
        yield Violation(
            f"{label} advertises no system_url, so it cannot be administered",
            "system_url",
            "a URL",
            describe(get_path(worker, "system_url")),
        )
    routes = get_path(worker, "routes")
    advertised = routes if isinstance(routes, list) else []
    missing = [route for route in required if route not in advertised]
    if missing:
        yield Violation(
            f"{label} lacks required route(s) {missing}", "routes", list(required), advertised
        )


@check(
    "admin.success_semantics",
    title="an administrative call succeeds by HTTP status AND body",
    spec="Built-in update routes commonly return `success` and `message`; check both HTTP "
    "status and body.",
    section=SECTION,
)
def success_semantics(family: str, status: int | None, body: Any, what: str = "") -> Findings:
    if status != 200:
        yield Violation(f"{what}: HTTP {status}", "status", 200, status)
        return
    if family == "sglang":
        # Built-in update routes answer {success, message}; the native tokenizer-manager routes
        # (pause_generation, continue_generation, ...) return nothing, which Dynamo turns into
        # {"status": "ok"}.
        if get_path(body, "success") is not True and get_path(body, "status") != "ok":
            yield Violation(
                f"{what} reported failure in its body: {get_path(body, 'message')}",
                "success",
                True,
                describe(get_path(body, "success")),
            )
        return
    state = get_path(body, "status")
    if state not in VLLM_SUCCESS:
        message = get_path(body, "message")
        yield Violation(
            f"{what} reported failure in its body: {'' if message is MISSING else message}",
            "status",
            "ok",
            describe(state),
        )


@check(
    "admin.unknown_route",
    title="an unknown /engine route is a 404 naming the route",
    spec="Never prepend, remove, or rename route segments returned in routes.",
    section=SECTION,
)
def unknown_route(status: int | None, body: Any) -> Findings:
    if status != 404:
        yield Violation("an unadvertised route did not answer 404", "status", 404, status)
    if not isinstance(get_path(body, "message"), str):
        yield Violation(
            "404 body lacks a message", "message", "string", describe(get_path(body, "message"))
        )
