"""The fake deployment's options are declared once (`deployment.options.OPTIONS`): the command
line, the validated set and a launcher's arguments all derive from that table."""

from __future__ import annotations

import dataclasses

import pytest

from fake_backends.__main__ import build_parser
from fake_backends.deployment.options import (
    OPTIONS,
    DeploymentOptions,
    command_line,
    parsed,
)

GIVEN = {
    "workers": 3,
    "model": "other",
    "worker_namespaces": ["ns1", "ns2"],
    "admin_family": "sidecar",
    "engine_routes": [],
    "listing_order": "rotated",
    "migration_limit": 2,
    "initial_model_path": "/ckpt",
    "ingress_coding": "gzip",
    "unpaused_update_status": 409,
    "vocabulary": 100,
    "admin_base_urls": True,
    "engine_call_delay_ms": 5.0,
    "dynamo_release": "1.6.1",
}


def test_the_validated_set_holds_exactly_the_table() -> None:
    fields = [field.name for field in dataclasses.fields(DeploymentOptions)]
    assert fields == ["backend", *(option.name for option in OPTIONS)]
    assert sorted(GIVEN) == sorted(option.name for option in OPTIONS)


def test_the_command_line_declares_every_option_with_the_tables_default() -> None:
    args = build_parser().parse_args(["vllm"])
    assert parsed(args) == {option.name: option.default for option in OPTIONS}
    assert DeploymentOptions.build("vllm", **parsed(args)) == DeploymentOptions.build("vllm")


def test_a_launchers_arguments_parse_back_to_the_same_options() -> None:
    args = build_parser().parse_args(["vllm", *command_line(**GIVEN)])
    assert parsed(args) == {**GIVEN, "engine_routes": None}  # no flag: the variable's routes
    options = DeploymentOptions.build("vllm", **parsed(args))
    assert options.worker_namespaces == ("ns1", "ns2")
    assert options.engine_call_delay_s == 0.005


def test_an_option_outside_the_table_is_refused() -> None:
    with pytest.raises(TypeError, match="no fake deployment option named worker"):
        command_line(worker=1)
    with pytest.raises(TypeError, match="no fake deployment option named worker"):
        DeploymentOptions.build("vllm", worker=1)
