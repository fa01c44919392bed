"""The deployment file of `--launch docker`: its shape is `schemas/docker-deployment.json`
(types, ranges, names, required and unknown keys), checked with jsonschema; the rules that tie
fields together (unique container names, an endpoint's container and published port, no
published ports on the host network, an IP address for host_ip) are checked here, after it.
Every error names the file, the field, the expected and the observed value.
"""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import best_match

from ..checks.schema_registry import validator
from ..errors import ConfigurationError

__all__ = [
    "ContainerSpec",
    "DockerDeployment",
    "Endpoint",
    "NetworkSpec",
    "PortSpec",
    "Readiness",
]

EXPECTATIONS = ("model-listed", "http-200")
# Network modes that are not user-defined networks: they take no aliases.
SPECIAL_NETWORKS = ("host", "bridge", "none", "default")
SCHEMA = "docker-deployment"


@dataclass(frozen=True)
class PortSpec:
    """One published TCP port; `host_port` None lets the engine choose a free one, which keeps
    parallel runs on one GPU host from colliding."""

    container_port: int
    host_port: int | None = None


@dataclass(frozen=True)
class ContainerSpec:
    """One container of the deployment. `name` is a suffix: the engine name is
    `<deployment>-<run id>-<name>`, and `name` is the container's alias on the deployment's
    network, so commands can address `http://etcd:2379` whatever the run id. An environment
    value of None passes the variable on from the launcher's own environment (for secrets such
    as HF_TOKEN, which then never sit in the config file)."""

    name: str
    image: str
    command: tuple[str, ...] | None = None
    environment: dict[str, str | None] = field(default_factory=dict)
    ports: tuple[PortSpec, ...] = ()
    gpus: str | int | tuple[str, ...] | None = None
    network: str | None = None
    volumes: tuple[str, ...] = ()
    shm_size: str | None = None

    def environment_for_engine(self) -> dict[str, str]:
        resolved = {}
        for key, value in self.environment.items():
            if value is None:
                value = os.environ.get(key)
            if value is not None:
                resolved[key] = value
        return resolved


@dataclass(frozen=True)
class Endpoint:
    """A service of the deployment: which container serves it, on which container port."""

    container: str
    port: int


@dataclass(frozen=True)
class NetworkSpec:
    """`create`: a dedicated bridge network for this run, removed by `stop()`; otherwise `name`
    is an existing network that the containers join and that is never removed."""

    create: bool
    name: str | None = None


@dataclass(frozen=True)
class Readiness:
    """When the deployment counts as up: `path` on the frontend answers 200 (and, with
    `expect="model-listed"`, lists the model, or any model when none is configured), and the RL
    listener lists at least `rl_workers` workers with routes and no error."""

    path: str = "/v1/models"
    expect: str = "model-listed"
    rl_workers: int = 0
    deadline_s: float = 900.0
    interval_s: float = 2.0


@dataclass(frozen=True)
class DockerDeployment:
    """A whole deployment, as read from its JSON file (see `from_file`)."""

    backend: str
    containers: tuple[ContainerSpec, ...]
    frontend: Endpoint
    rl: Endpoint | None = None
    name: str = ""
    model: str | None = None
    pull: bool = False
    host_ip: str = "127.0.0.1"
    url_host: str | None = None
    network: NetworkSpec | None = None
    readiness: Readiness = field(default_factory=Readiness)
    stop_timeout_s: float = 10.0
    dynamo_release: str | None = None
    """The release the images run, as the file declares it."""
    source: str = "<config>"

    @classmethod
    def from_file(cls, path: str | Path) -> DockerDeployment:
        """Read and validate a deployment file; every error names the file, the field, the
        expected and the observed value."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(
                f"--docker-config: cannot read {path}: {exc.strerror or exc}"
            ) from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(
                f"{path}: expected a JSON document, observed invalid JSON at line {exc.lineno}"
                f" column {exc.colno}: {exc.msg}"
            ) from exc
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<config>") -> DockerDeployment:
        _check_schema(data, source)
        return _build(data, source)

    def container(self, name: str) -> ContainerSpec:
        for spec in self.containers:
            if spec.name == name:
                return spec
        raise KeyError(name)


def show(value: Any) -> str:
    if value is _ABSENT:
        return "nothing (the field is absent)"
    shown = json.dumps(value)
    return shown if len(shown) <= 120 else shown[:117] + "..."


_ABSENT = object()


def _error(source: str, path: str, expected: str, observed: str) -> ConfigurationError:
    return ConfigurationError(
        f"{source}: {path or '(top level)'}: expected {expected}, observed {observed}"
    )


def _path(steps: Any) -> str:
    text = ""
    for step in steps:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text


def _expected(error: ValidationError, schema: Draft202012Validator) -> str:
    """The `x-expected` of the innermost schema that says one, up the error's schema path."""
    for candidate in (error.schema, *(e.schema for e in reversed(list(_parents(error))))):
        if isinstance(candidate, dict) and "x-expected" in candidate:
            return str(candidate["x-expected"])
    return str(error.message)


def _parents(error: ValidationError) -> Any:
    parent = error.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def _check_schema(data: Any, source: str) -> None:
    checker = validator(SCHEMA)
    error = best_match(checker.iter_errors(data))
    if error is None:
        return
    if error.validator == "required":
        missing = error.message.split("'")[1]
        properties = error.schema.get("properties", {})
        expected = properties.get(missing, {}).get("x-expected", "a value")
        path = _path([*error.absolute_path, missing])
        raise _error(source, path, expected, show(_ABSENT))
    if error.validator == "additionalProperties":
        known = ", ".join(error.schema.get("properties", {}))
        unknown = [key for key in error.instance if key not in error.schema.get("properties", {})]
        path = _path([*error.absolute_path, unknown[0]])
        raise _error(source, path, f"one of the known keys ({known})", "an unknown key")
    if error.context:  # anyOf: the alternatives' errors are less telling than the field's
        error = ValidationError(
            error.message, instance=error.instance, schema=error.schema, path=error.absolute_path
        )
    raise _error(
        source, _path(error.absolute_path), _expected(error, checker), show(error.instance)
    )


def _build(data: dict[str, Any], source: str) -> DockerDeployment:
    backend = data["backend"]
    containers = []
    seen: set[str] = set()
    for index, raw in enumerate(data["containers"]):
        spec = _container(raw, f"containers[{index}]", source)
        if spec.name in seen:
            raise _error(
                source,
                f"containers[{index}].name",
                "a name not used by another container",
                f"{show(spec.name)} (used twice)",
            )
        seen.add(spec.name)
        containers.append(spec)
    by_name = {spec.name: spec for spec in containers}
    frontend = _endpoint(data["frontend"], "frontend", by_name, source)
    rl = _endpoint(data["rl"], "rl", by_name, source) if data.get("rl") else None
    readiness = _readiness(data.get("readiness") or {})
    if readiness.rl_workers and rl is None:
        raise _error(
            source,
            "readiness.rl_workers",
            '0 when no "rl" endpoint is configured',
            show(readiness.rl_workers),
        )
    host_ip = data.get("host_ip", "127.0.0.1")
    try:
        ipaddress.ip_address(host_ip)
    except ValueError:
        raise _error(source, "host_ip", "an IP address such as 127.0.0.1", show(host_ip)) from None
    return DockerDeployment(
        backend=backend,
        containers=tuple(containers),
        frontend=frontend,
        rl=rl,
        name=data.get("name", f"docker-{backend}"),
        model=data.get("model"),
        pull=data.get("pull", False),
        host_ip=host_ip,
        url_host=data.get("url_host"),
        network=_network(data.get("network"), source),
        readiness=readiness,
        stop_timeout_s=float(data.get("stop_timeout_s", 10.0)),
        dynamo_release=data.get("dynamo_release"),
        source=source,
    )


def _network(raw: dict[str, Any] | None, source: str) -> NetworkSpec | None:
    if raw is None:
        return None
    create, existing = bool(raw.get("create", False)), raw.get("name")
    if create == (existing is not None):
        raise _error(
            source,
            "network",
            'either {"create": true} or {"name": "<existing network>"}',
            show(raw),
        )
    if existing in SPECIAL_NETWORKS:
        raise _error(
            source,
            "network.name",
            'a user-defined network (set "network": "host" per container instead)',
            show(existing),
        )
    return NetworkSpec(create=create, name=existing)


def _container(raw: dict[str, Any], where: str, source: str) -> ContainerSpec:
    ports = tuple(
        PortSpec(item) if isinstance(item, int) else PortSpec(item["container"], item.get("host"))
        for item in raw.get("ports") or ()
    )
    if len({port.container_port for port in ports}) != len(ports):
        raise _error(source, f"{where}.ports", "each container port once", show(raw["ports"]))
    if raw.get("network") == "host" and ports:
        raise _error(
            source,
            f"{where}.ports",
            'no published ports with "network": "host" (the container uses the host\'s ports '
            "directly)",
            show(raw["ports"]),
        )
    gpus = raw.get("gpus")
    command = raw.get("command")
    return ContainerSpec(
        name=raw["name"],
        image=raw["image"],
        command=None if command is None else tuple(command),
        environment=dict(raw.get("environment") or {}),
        ports=ports,
        gpus=tuple(str(item) for item in gpus) if isinstance(gpus, list) else gpus,
        network=raw.get("network"),
        volumes=tuple(raw.get("volumes") or ()),
        shm_size=raw.get("shm_size"),
    )


def _endpoint(
    raw: dict[str, Any], key: str, containers: dict[str, ContainerSpec], source: str
) -> Endpoint:
    name, port = raw["container"], raw["port"]
    if name not in containers:
        raise _error(
            source,
            f"{key}.container",
            f"one of the container names {sorted(containers)}",
            show(name),
        )
    spec = containers[name]
    published = [p.container_port for p in spec.ports]
    if spec.network != "host" and port not in published:
        raise _error(
            source,
            f"{key}.port",
            f"a port that container {name!r} publishes {published}",
            show(port),
        )
    return Endpoint(name, port)


def _readiness(raw: dict[str, Any]) -> Readiness:
    return Readiness(
        path=raw.get("path", "/v1/models"),
        expect=raw.get("expect", "model-listed"),
        rl_workers=raw.get("rl_workers", 0),
        deadline_s=float(raw.get("deadline_s", 900.0)),
        interval_s=float(raw.get("interval_s", 2.0)),
    )
