"""Administration families: success words per route, route negotiation per family, and the
calls a refresh makes, against the upstream shapes (`rl_conformance.control.families`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.checks import admin
from rl_conformance.control.admin import AdminWorker
from rl_conformance.control.families import (
    SGLANG,
    TRANSFER_ALL_OR_NONE,
    VLLM,
    VLLM_SIDECAR,
    NewWeights,
    discovered_family,
    family_for,
)
from rl_conformance.model.target import Target
from rl_conformance.model.weight_transfer import WeightTransfer

RECORDED_LISTING = (
    Path(__file__).parents[2] / "fixtures/dynamo-1.6.1/vllm-sidecar/rl_workers_get.json"
)
SIDECAR_ROUTES: list[str] = json.loads(RECORDED_LISTING.read_text())["response"]["body"]["workers"][
    0
]["routes"]
"""What the real 1.6.1 sidecar advertised, sleep mode and weight transfer on."""


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("control/pause_generation", {"status": "paused"}),
        ("control/resume_generation", {"status": "resumed"}),
        ("control/is_paused", {"is_paused": False}),
        ("control/is_sleeping", {"is_sleeping": True}),
        ("control/get_weight_version", {"weight_version": ""}),
        ("control/get_weight_version", {"weight_version": None}),
        ("control/wake_up", {"status": "partially_awake", "is_sleeping": True}),
        ("update/update_weight_version", {"success": True, "new_version": "v"}),
        ("update/init_weight_transfer_engine", {"message": "Weight transfer initialized"}),
        ("update/update_weights", {"message": "Weights updated"}),
        ("update/finish_weight_update", {"message": "Weight update finished"}),
        ("update/model_taints", {"status": "ok", "taints": []}),
    ],
)
def test_sidecar_success_words(route: str, body: Any) -> None:
    assert admin.success_semantics("vllm-sidecar", route, 200, body).passed


@pytest.mark.parametrize(
    ("route", "status", "body", "field"),
    [
        ("control/pause_generation", 200, {"status": "ok"}, "status"),
        ("control/pause_generation", 200, {"status": "error", "message": "bad mode"}, "status"),
        ("control/resume_generation", 200, {}, "status"),
        ("control/is_paused", 200, {"is_paused": "no"}, "is_paused"),
        ("control/get_weight_version", 200, {"status": "ok"}, "weight_version"),
        ("update/update_weight_version", 200, {"new_version": "v"}, "success"),
        ("update/finish_weight_update", 200, {"status": "ok"}, "message"),
        ("update/finish_weight_update", 500, {"error": "Handler error"}, "status"),
        ("update/update_weights", 200, [1], "status"),
    ],
)
def test_sidecar_failures(route: str, status: int, body: Any, field: str) -> None:
    result = admin.success_semantics("vllm-sidecar", route, status, body, "worker 1")
    assert not result.passed
    assert result.violations[0].field == field
    assert route in result.violations[0].message


def test_python_words_are_not_the_sidecars() -> None:
    """The Python worker's `{"status": "ok"}` on a pause is a failure in the sidecar family, and
    the sidecar's `{"status": "paused"}` is one in the Python family."""
    assert not admin.success_semantics(
        "vllm-sidecar", "control/pause_generation", 200, {"status": "ok"}
    ).passed
    assert not admin.success_semantics("vllm", "pause_generation", 200, {"status": "paused"}).passed


def worker(routes: list[str], **extra: Any) -> dict[str, Any]:
    return {"instance_id": 7, "system_url": "http://127.0.0.1:1", "routes": routes, **extra}


def test_negotiation_per_family() -> None:
    assert discovered_family(SIDECAR_ROUTES) is VLLM_SIDECAR
    assert discovered_family(["pause_generation", "liveness_probe"]) is VLLM
    assert discovered_family(["update/model_taints"]) is None
    ok = admin.route_negotiation(
        worker(SIDECAR_ROUTES), VLLM_SIDECAR.required, TRANSFER_ALL_OR_NONE
    )
    assert ok.passed
    control_only = [r for r in SIDECAR_ROUTES if r not in TRANSFER_ALL_OR_NONE]
    assert admin.route_negotiation(
        worker(control_only), VLLM_SIDECAR.required, TRANSFER_ALL_OR_NONE
    ).passed, "weight transfer disabled is a configuration, not a violation"
    partial = [r for r in SIDECAR_ROUTES if r != "update/finish_weight_update"]
    result = admin.route_negotiation(worker(partial), VLLM_SIDECAR.required, TRANSFER_ALL_OR_NONE)
    assert not result.passed and "update/finish_weight_update" in result.violations[0].message
    unknown = admin.route_negotiation(worker(["update/model_taints"]), None)
    assert not unknown.passed and "no known administration family" in unknown.violations[0].message


def test_family_from_what_a_worker_advertises() -> None:
    vllm = Target(id="t", backend="vllm", kind="external", frontend_url="http://x")
    sglang = Target(id="s", backend="sglang", kind="external", frontend_url="http://x")
    by_url = AdminWorker(None, "http://w", None)
    assert family_for(sglang, by_url) is SGLANG
    assert family_for(vllm, by_url) is None
    assert family_for(vllm, AdminWorker(1, "http://w", tuple(SIDECAR_ROUTES))) is VLLM_SIDECAR


def test_sidecar_refresh_calls() -> None:
    transfer = WeightTransfer({"master_port": 1}, ({"names": ["a"]}, {"names": ["b"]}))
    weights = NewWeights("v9", transfer=transfer)
    assert [(c.route, dict(c.body)) for c in VLLM_SIDECAR.setup_calls(weights)] == [
        ("update/init_weight_transfer_engine", {"init_info": {"master_port": 1}})
    ]
    assert [(c.route, dict(c.body)) for c in VLLM_SIDECAR.update_calls(weights)] == [
        ("update/start_weight_update", {}),
        ("update/update_weights", {"update_info": {"names": ["a"]}}),
        ("update/update_weights", {"update_info": {"names": ["b"]}}),
        ("update/finish_weight_update", {"weight_version": "v9"}),
    ]
    assert VLLM_SIDECAR.pause_body() == {"mode": "wait", "clear_cache": True}
    assert VLLM_SIDECAR.pause_body("keep") == {"mode": "keep", "clear_cache": False}
    assert VLLM_SIDECAR.read_version({"weight_version": "v9"}) == "v9"
    call = VLLM_SIDECAR.set_version_call("v10")
    assert call is not None and dict(call.body) == {"new_version": "v10"}


def test_python_refresh_calls() -> None:
    (call,) = VLLM.update_calls(NewWeights("v1", model_path="/ckpt"))
    assert (call.route, dict(call.body)) == (
        "update_weights_from_disk",
        {"model_path": "/ckpt", "weight_version": "v1"},
    )
    assert VLLM.setup_calls(NewWeights("v1")) == []
    assert VLLM.pause_body() == {"mode": "keep"}
    assert VLLM.read_version({"status": "ok", "version": "v1"}) == "v1"


def test_sglang_refreshes_pause_with_a_mode_that_leaves_the_cache_flushable() -> None:
    """An SGLang update flushes the cache, which an `in_place` pause leaves unflushable: a refresh
    retracts; `in_place` is sent only where a test names it."""
    assert SGLANG.refresh_mode == "retract"
    assert SGLANG.pause_body() == {"mode": "retract"}
    assert SGLANG.pause_body("in_place") == {"mode": "in_place"}
    assert SGLANG.refresh_mode in SGLANG.pause_modes
