"""A `DockerLauncher` deployment file read without an engine: the example in deploy/ is valid,
and a bad one is a configuration error that names the field, the expected and the observed
value (one row per rule), or says the file is no JSON or cannot be read."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.errors import ConfigurationError
from rl_conformance.launchers.docker import DockerDeployment

from .docker_deployment_base import BASE


def test_the_example_deployment_in_deploy_is_valid() -> None:
    example = Path(__file__).resolve().parents[2] / "deploy" / "docker" / "vllm-agg.json"
    deployment = DockerDeployment.from_file(example)
    assert deployment.backend == "vllm"
    assert any(spec.gpus == "all" for spec in deployment.containers)


def _set(path: str, value: Any) -> dict[str, Any]:
    """BASE with the value at a dotted path (`containers.1.gpus`) replaced or, for `...`,
    deleted."""
    data = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    key: Any = int(last) if isinstance(node, list) else last
    if value is ...:
        del node[key]
    else:
        node[key] = value
    return data


BAD_CONFIGS = [
    ("backend", "tensorrt", "backend", "one of vllm, sglang, trtllm", '"tensorrt"'),
    ("backend", ..., "backend", "one of vllm, sglang, trtllm", "nothing (the field is absent)"),
    ("containers.1.gpus", "two", "containers[1].gpus", '"all", a positive number', '"two"'),
    ("containers.1.gpus", 0, "containers[1].gpus", "a positive number of GPUs", "0"),
    ("containers.1.gpus", True, "containers[1].gpus", '"all"', "true"),
    ("containers.1.gpus", [], "containers[1].gpus", "a non-empty list of device ids", "[]"),
    ("containers.0.image", ..., "containers[0].image", "an image reference", "nothing"),
    ("containers.0.name", "front end", "containers[0].name", "a Docker name", '"front end"'),
    (
        "containers.0.command",
        "python3 -m dynamo.frontend",
        "containers[0].command",
        "a list of strings",
        '"python3 -m dynamo.frontend"',
    ),
    (
        "containers.0.environment.DYN_RL_PORT",
        8001,
        "containers[0].environment.DYN_RL_PORT",
        "a string (quote numbers)",
        "8001",
    ),
    (
        "containers.0.ports",
        [8000, "8001"],
        "containers[0].ports[1]",
        "a list of container ports",
        '"8001"',
    ),
    (
        "containers.0.ports",
        [{"container": 70000}],
        "containers[0].ports[0].container",
        "an integer from 1 to 65535",
        "70000",
    ),
    (
        "containers.0.gpu",
        1,
        "containers[0].gpu",
        "one of the known keys (name, image,",
        "an unknown key",
    ),
    (
        "containers.1.name",
        "frontend",
        "containers[1].name",
        "a name not used by another",
        '"frontend"',
    ),
    ("containers", [], "containers", "a non-empty list of container objects", "[]"),
    ("frontend.port", 9000, "frontend.port", "a port that container 'frontend' publishes", "9000"),
    (
        "frontend.container",
        "router",
        "frontend.container",
        "one of the container names ['frontend', 'worker']",
        '"router"',
    ),
    ("frontend", ..., "frontend", "a JSON object", "nothing (the field is absent)"),
    ("rl.port", "8001", "rl.port", "an integer from 1 to 65535", '"8001"'),
    ("readiness.deadline_s", -1, "readiness.deadline_s", "a positive number of seconds", "-1"),
    (
        "readiness.expect",
        "healthy",
        "readiness.expect",
        "one of model-listed, http-200",
        '"healthy"',
    ),
    (
        "readiness.path",
        "v1/models",
        "readiness.path",
        'an HTTP path starting with "/"',
        '"v1/models"',
    ),
    ("network", {"name": "host"}, "network.name", "a user-defined network", '"host"'),
    (
        "containers.0.network",
        "host",
        "containers[0].ports",
        'no published ports with "network"',
        "[8000, 8001]",
    ),
    ("host_ip", "localhost", "host_ip", "an IP address", '"localhost"'),
    ("pull", "yes", "pull", "true or false", '"yes"'),
    (
        "network",
        {"create": True, "name": "shared"},
        "network",
        'either {"create": true} or {"name": "<existing network>"}',
        '{"create": true, "name"',
    ),
]


@pytest.mark.parametrize(
    ("path", "value", "field", "expected", "observed"),
    BAD_CONFIGS,
    ids=[f"{case[0]}={case[1]!r}" for case in BAD_CONFIGS],
)
def test_a_bad_config_names_the_field_the_expected_and_the_observed_value(
    tmp_path: Path, path: str, value: Any, field: str, expected: str, observed: str
) -> None:
    file = tmp_path / "deployment.json"
    file.write_text(json.dumps(_set(path, value)))
    with pytest.raises(ConfigurationError) as failure:
        DockerDeployment.from_file(file)
    message = str(failure.value)
    assert message.startswith(f"{file}: {field}: expected ")
    assert expected in message.split(", observed ")[0]
    assert message.split(", observed ", 1)[1].startswith(observed)


def test_a_file_that_is_not_json_is_a_configuration_error(tmp_path: Path) -> None:
    file = tmp_path / "deployment.json"
    file.write_text('{"backend": "vllm",}')
    with pytest.raises(ConfigurationError, match=r"expected a JSON document, observed invalid"):
        DockerDeployment.from_file(file)
    with pytest.raises(ConfigurationError, match=r"cannot read .*absent\.json"):
        DockerDeployment.from_file(tmp_path / "absent.json")
