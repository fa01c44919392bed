"""`admin.distributed_update` passes a faithful worker's sequence and each legal refusal (an error
body, a 4xx, the engine's 500 for a body its request object refuses), and fails exactly the rule
a run breaks: a step that did not succeed, a declared version not reported, a call that must be
refused answered as a success, or one that moved the version."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rl_conformance.checks.base import MISSING
from rl_conformance.checks.distributed import Refused, VersionedUpdate, call, versioned_update

UPDATE = "update_weights_from_distributed"


def faithful(
    refusal: tuple[int, Any] = (200, {"status": "error", "message": "no group"}),
) -> VersionedUpdate:
    status, body = refusal
    return VersionedUpdate(
        family="vllm",
        worker="worker 1",
        sequence=(
            call("vllm", "init", "init_weights_update_group", 200, {"status": "ok"}),
            call("vllm", "update", UPDATE, 200, {"status": "ok", "version": "v2"}),
            call("vllm", "destroy", "destroy_weights_update_group", 200, {"status": "ok"}),
        ),
        declared="v2",
        reported="v2",
        refused=(Refused(call("vllm", "early", UPDATE, status, body), "no group", "v1", "v1"),),
    )


@pytest.mark.parametrize(
    "refusal",
    [
        (200, {"status": "error", "message": "no weight update group"}),
        (400, {"detail": "no group"}),
        (500, {"error": "UpdateWeightsFromDistributedReqInput.__init__() missing 'names'"}),
    ],
)
def test_a_faithful_sequence_and_any_refusal_pass(refusal: tuple[int, Any]) -> None:
    result = versioned_update(faithful(refusal))
    assert result.passed, result.explain()


def test_an_unread_version_is_not_judged() -> None:
    assert versioned_update(dataclasses.replace(faithful(), reported=MISSING)).passed


def test_sglang_success_semantics_apply_to_its_steps() -> None:
    ok = call("sglang", "update", "control/" + UPDATE, 200, {"success": True, "message": "ok"})
    failed = call("sglang", "update", "control/" + UPDATE, 200, {"success": False})
    assert ok.succeeded and not failed.succeeded


@pytest.mark.parametrize(
    ("broken", "named"),
    [
        (
            {"sequence": (call("vllm", "update", UPDATE, 200, {"status": "error"}),)},
            "did not succeed",
        ),
        ({"reported": "v1"}, "reports 'v1'"),
        (
            {
                "refused": (
                    Refused(
                        call("vllm", "early", UPDATE, 200, {"status": "ok"}), "no group", "v1", "v1"
                    ),
                )
            },
            "failed open",
        ),
        (
            {
                "refused": (
                    Refused(
                        call("vllm", "early", UPDATE, 400, {"detail": "x"}), "no group", "v1", "v3"
                    ),
                )
            },
            "changed the reported version",
        ),
    ],
)
def test_each_broken_rule_fails(broken: dict[str, Any], named: str) -> None:
    result = versioned_update(dataclasses.replace(faithful(), **broken))
    assert not result.passed and named in result.violations[0].message, result.explain()
