"""Worker administration: negotiated routes and success semantics per administration family.

Success words per family, from the upstream sources (recorded in
`fixtures/dynamo-1.6.1/README.md` and `fixtures/KNOWN_DIFFERENCES.md`):

* `vllm` (Python worker, `dynamo/vllm/handlers.py`): `{"status": "ok" | "success", ...}`;
* `vllm-sidecar` (native sidecar, vLLM's RL API): `control/pause_generation` →
  `{"status": "paused"}`, `control/resume_generation` → `{"status": "resumed"}`,
  `control/is_paused` → `{"is_paused": bool}`, `control/get_weight_version` →
  `{"weight_version": ...}` with no status, `update/update_weight_version` →
  `{"success": true, "new_version": ...}`, the transfer routes → `{"message": ...}` with no
  status; a handled failure is HTTP 200 `{"status": "error", "message": ...}`;
* `sglang`: built-in update routes `{"success": true, "message"}`; native tokenizer-manager routes
  return nothing, which Dynamo turns into `{"status": "ok"}`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import contract
from .base import (
    MISSING,
    RELEASE_BEHAVIOUR,
    Findings,
    Violation,
    check,
    describe,
    get_path,
)

SECTION = "Compare vLLM and SGLang Administration"
VLLM_SUCCESS = frozenset({"ok", "success"})
SIDECAR_STATUS = {
    "control/pause_generation": ("paused",),
    "control/resume_generation": ("resumed",),
    "control/sleep": ("sleeping",),
    "control/wake_up": ("awake", "partially_awake"),
}
SIDECAR_BOOLEAN = {"control/is_paused": "is_paused", "control/is_sleeping": "is_sleeping"}
SIDECAR_MESSAGE = frozenset(
    {
        "update/init_weight_transfer_engine",
        "update/start_weight_update",
        "update/start_draft_weight_update",
        "update/update_weights",
        "update/finish_weight_update",
    }
)


@check(contract.admin.ROUTE_NEGOTIATION)
def route_negotiation(
    worker: Any, required: Iterable[str] | None, all_or_none: Iterable[str] = ()
) -> Findings:
    """`required` None: the worker speaks no known administration family. `all_or_none`: routes
    listed together or not at all (the sidecar's weight-transfer set)."""
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
    if required is None:
        yield Violation(
            f"{label} speaks no known administration family: it advertises neither the Python "
            "worker's pause_generation nor the native sidecar's control/pause_generation",
            "routes",
            "pause_generation or control/pause_generation",
            advertised,
        )
        return
    wanted = list(required)
    missing = [route for route in wanted if route not in advertised]
    if missing:
        yield Violation(f"{label} lacks required route(s) {missing}", "routes", wanted, advertised)
    group = list(all_or_none)
    present = [route for route in group if route in advertised]
    if present and len(present) != len(group):
        yield Violation(
            f"{label} lists part of a route set that is listed whole or not at all: missing "
            f"{[route for route in group if route not in advertised]}",
            "routes",
            group,
            present,
        )


@check(contract.admin.SUCCESS_SEMANTICS)
def success_semantics(
    family: str, route: str, status: int | None, body: Any, where: str = ""
) -> Findings:
    what = f"{route} on {where}" if where else route
    if status is None:
        yield Violation(f"{what}: no answer (the connection ended first)", "status", 200, None)
        return
    if status != 200:
        yield Violation(f"{what}: HTTP {status}", "status", 200, status)
        return
    if family == "sglang":
        if get_path(body, "success") is not True and get_path(body, "status") != "ok":
            yield Violation(
                f"{what} reported failure in its body: {_message(body)}",
                "success",
                True,
                describe(get_path(body, "success")),
            )
        return
    if family == "vllm-sidecar":
        yield from _sidecar(route, body, what)
        return
    state = get_path(body, "status")
    if state not in VLLM_SUCCESS:
        yield Violation(
            f"{what} reported failure in its body: {_message(body)}",
            "status",
            "ok",
            describe(state),
        )


@check(
    "admin.update_taken_while_holding",
    title="an update sent while an in-place pause holds requests is taken, not refused",
    spec="No sentence of the spec fixes whether a worker takes an update while a pause holds "
    "requests in place. SGLang's RL guide says a cache flush after an in_place pause is "
    "unsuccessful (docs/advanced_features/sglang_for_rl.md); Dynamo 1.6.1 with SGLang 0.5.21 "
    "then exits, Dynamo 1.7.0.dev20261026 with SGLang 0.5.23 answers the update HTTP 200 "
    "success false, the weights loaded and the cache not flushed, and keeps serving "
    "(fixtures/KNOWN_DIFFERENCES.md). A refusal in the body is a release's choice: flagged, "
    "not failed; no answer, or an HTTP error, is judged as any other step.",
    section=RELEASE_BEHAVIOUR,
    normative=False,
)
def update_taken_while_holding(
    family: str, route: str, status: int | None, body: Any, where: str = ""
) -> Findings:
    """Only an answered update whose body reports failure is a difference; anything else is
    `success_semantics`'s to judge."""
    if status != 200:
        return
    refused = next(iter(success_semantics(family, route, status, body, where).violations), None)
    if refused is not None:
        yield refused


def _sidecar(route: str, body: Any, what: str) -> Findings:
    state = get_path(body, "status")
    if state == "error" or not isinstance(body, dict):
        yield Violation(
            f"{what} reported failure in its body: {_message(body)}",
            "status",
            "no error",
            describe(state) if isinstance(body, dict) else body,
        )
        return
    if route in SIDECAR_STATUS:
        if state not in SIDECAR_STATUS[route]:
            yield Violation(
                f"{what} did not answer vLLM's status word",
                "status",
                "|".join(SIDECAR_STATUS[route]),
                describe(state),
            )
    elif route in SIDECAR_BOOLEAN:
        key = SIDECAR_BOOLEAN[route]
        if not isinstance(get_path(body, key), bool):
            yield Violation(
                f"{what} did not report {key}", key, "a boolean", describe(get_path(body, key))
            )
    elif route == "control/get_weight_version":
        if "weight_version" not in body:
            yield Violation(
                f"{what} did not report weight_version", "weight_version", "present", "(absent)"
            )
    elif route == "update/update_weight_version":
        if get_path(body, "success") is not True:
            yield Violation(
                f"{what} did not report success",
                "success",
                True,
                describe(get_path(body, "success")),
            )
    elif route in SIDECAR_MESSAGE:
        if not isinstance(get_path(body, "message"), str):
            yield Violation(
                f"{what} answered without vLLM's message",
                "message",
                "a string",
                describe(get_path(body, "message")),
            )
    elif state is not MISSING and state not in ("ok", "success"):
        yield Violation(f"{what} reported an unknown status", "status", "ok", describe(state))


def _message(body: Any) -> str:
    message = get_path(body, "message")
    return "" if message is MISSING else str(message)


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
