"""A deployment started from container images on a Docker engine, typically a GPU host running
the Dynamo vLLM/SGLang/TensorRT-LLM runtime images for a nightly run.

The deployment is described by a JSON file (`DockerDeployment.from_file`); see `deploy/README.md`
and `deploy/docker/vllm-agg.json`. Every object this launcher creates on the engine carries the
label `dynamo-rl-conformance.run=<run id>`, and `stop()` removes only objects it created itself or
that carry its own run id: a container of another run, or of someone else, is never touched, even
when the names collide.

Readiness is polled over plain HTTP from this process, so the frontend must be reachable from
here: published ports bind 127.0.0.1 by default, which suits a runner on the GPU host itself.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
import secrets
import shlex
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import httpx
import requests
from docker.errors import DockerException, ImageNotFound, NotFound
from docker.models.containers import Container
from docker.types import DeviceRequest

from ..capabilities import Backend
from ..errors import ConfigurationError, LaunchError
from ..target import Target

__all__ = [
    "JOB_LABEL",
    "RUN_LABEL",
    "ContainerSpec",
    "DockerDeployment",
    "DockerLauncher",
    "Endpoint",
    "NetworkSpec",
    "PortSpec",
    "Readiness",
    "launcher_from_config",
]

logger = logging.getLogger(__name__)

RUN_LABEL = "dynamo-rl-conformance.run"
JOB_LABEL = "dynamo-rl-conformance.job"
JOB_ENV = "RL_CONFORMANCE_JOB"
DEPLOYMENT_LABEL = "dynamo-rl-conformance.deployment"
ROLE_LABEL = "dynamo-rl-conformance.container"
LOG_TAIL_LINES = 40
EXPECTATIONS = ("model-listed", "http-200")
# Network modes that are not user-defined networks: they take no aliases.
_SPECIAL_NETWORKS = ("host", "bridge", "none", "default")
_DOCKER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
_ABSENT = object()


# -- the configuration ----------------------------------------------------------------------


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

    def device_requests(self) -> list[DeviceRequest]:
        """`docker run --gpus` as the engine API spells it."""
        if self.gpus is None:
            return []
        if self.gpus == "all":
            return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
        if isinstance(self.gpus, int):
            return [DeviceRequest(count=self.gpus, capabilities=[["gpu"]])]
        return [DeviceRequest(device_ids=list(self.gpus), capabilities=[["gpu"]])]


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
        return _parse_deployment(_Fields(data, "", source, _TOP_KEYS))

    def container(self, name: str) -> ContainerSpec:
        for spec in self.containers:
            if spec.name == name:
                return spec
        raise KeyError(name)


_TOP_KEYS = (
    "name",
    "backend",
    "model",
    "pull",
    "host_ip",
    "url_host",
    "network",
    "containers",
    "frontend",
    "rl",
    "readiness",
    "stop_timeout_s",
)
_CONTAINER_KEYS = (
    "name",
    "image",
    "command",
    "environment",
    "ports",
    "gpus",
    "network",
    "volumes",
    "shm_size",
)
_READINESS_KEYS = ("path", "expect", "rl_workers", "deadline_s", "interval_s")


def _show(value: Any) -> str:
    if value is _ABSENT:
        return "nothing (the field is absent)"
    shown = json.dumps(value)
    return shown if len(shown) <= 120 else shown[:117] + "..."


class _Fields:
    """One JSON object of the config, read field by field; an error names the field's path
    (`containers[1].gpus`), what was expected and what was found."""

    def __init__(self, data: Any, where: str, source: str, allowed: tuple[str, ...]) -> None:
        self.where = where
        self.source = source
        if not isinstance(data, dict):
            raise self.error("", "a JSON object", data)
        self.data: dict[str, Any] = data
        for key in data:
            if key not in allowed:
                known = f"one of the known keys ({', '.join(allowed)})"
                raise self.error(key, known, key, verbatim="an unknown key")

    def path(self, key: str) -> str:
        if not key:
            return self.where or "(top level)"
        return f"{self.where}.{key}" if self.where else key

    def error(
        self, key: str, expected: str, observed: Any, *, verbatim: str | None = None
    ) -> ConfigurationError:
        """`verbatim` replaces the JSON rendering of `observed` when words say more."""
        return ConfigurationError(
            f"{self.source}: {self.path(key)}: expected {expected}, "
            f"observed {verbatim or _show(observed)}"
        )

    def get(self, key: str) -> Any:
        return self.data.get(key, _ABSENT)

    def string(
        self,
        key: str,
        *,
        default: Any = _ABSENT,
        pattern: re.Pattern[str] | None = None,
        expected: str = "a non-empty string",
    ) -> Any:
        value = self.get(key)
        if value is _ABSENT or (value is None and default is not _ABSENT):
            if default is _ABSENT:
                raise self.error(key, expected, value)
            return default
        if (
            not isinstance(value, str)
            or not value
            or (pattern is not None and not pattern.fullmatch(value))
        ):
            raise self.error(key, expected, value)
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.get(key)
        if value is _ABSENT:
            return default
        if not isinstance(value, bool):
            raise self.error(key, "true or false", value)
        return value

    def integer(self, key: str, *, low: int, high: int, default: Any = _ABSENT) -> Any:
        value = self.get(key)
        if value is _ABSENT and default is not _ABSENT:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.error(key, f"an integer from {low} to {high}", value)
        return value

    def seconds(self, key: str, default: float) -> float:
        value = self.get(key)
        if value is _ABSENT:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise self.error(key, "a positive number of seconds", value)
        return float(value)

    def child(self, key: str, allowed: tuple[str, ...]) -> _Fields:
        return _Fields(self.get(key), self.path(key), self.source, allowed)


def _parse_deployment(top: _Fields) -> DockerDeployment:
    backends = ", ".join(b.value for b in Backend)
    backend = top.string("backend", expected=f"one of {backends}")
    if backend not in {b.value for b in Backend}:
        raise top.error("backend", f"one of {backends}", backend)
    name = top.string(
        "name",
        default=f"docker-{backend}",
        pattern=_DOCKER_NAME,
        expected="a Docker name ([a-zA-Z0-9][a-zA-Z0-9_.-]*)",
    )
    host_ip = top.string("host_ip", default="127.0.0.1", expected="an IP address")
    try:
        ipaddress.ip_address(host_ip)
    except ValueError:
        raise top.error("host_ip", "an IP address such as 127.0.0.1", host_ip) from None
    containers_raw = top.get("containers")
    if not isinstance(containers_raw, list) or not containers_raw:
        raise top.error("containers", "a non-empty list of container objects", containers_raw)
    containers = []
    seen: set[str] = set()
    for index, raw in enumerate(containers_raw):
        spec = _parse_container(_Fields(raw, f"containers[{index}]", top.source, _CONTAINER_KEYS))
        if spec.name in seen:
            raise ConfigurationError(
                f"{top.source}: containers[{index}].name: expected a name not used by another "
                f"container, observed {_show(spec.name)} (used twice)"
            )
        seen.add(spec.name)
        containers.append(spec)
    by_name = {spec.name: spec for spec in containers}
    frontend = _parse_endpoint(top, "frontend", by_name, required=True)
    assert frontend is not None
    rl = _parse_endpoint(top, "rl", by_name, required=False)
    readiness = _parse_readiness(top)
    if readiness.rl_workers and rl is None:
        raise top.error(
            "readiness.rl_workers", '0 when no "rl" endpoint is configured', readiness.rl_workers
        )
    network = None
    if top.get("network") not in (_ABSENT, None):
        fields = top.child("network", ("create", "name"))
        create = fields.boolean("create", False)
        existing = fields.string(
            "name",
            default=None,
            pattern=_DOCKER_NAME,
            expected="the name of an existing Docker network",
        )
        if create == (existing is not None):
            raise fields.error(
                "", 'either {"create": true} or {"name": "<existing network>"}', fields.data
            )
        if existing in _SPECIAL_NETWORKS:
            raise fields.error(
                "name",
                'a user-defined network (set "network": "host" per container instead)',
                existing,
            )
        network = NetworkSpec(create=create, name=existing)
    return DockerDeployment(
        backend=backend,
        containers=tuple(containers),
        frontend=frontend,
        rl=rl,
        name=name,
        model=top.string("model", default=None),
        pull=top.boolean("pull", False),
        host_ip=host_ip,
        url_host=top.string("url_host", default=None, expected="a host name or IP address"),
        network=network,
        readiness=readiness,
        stop_timeout_s=top.seconds("stop_timeout_s", 10.0),
        source=top.source,
    )


def _parse_container(fields: _Fields) -> ContainerSpec:
    name = fields.string(
        "name", pattern=_DOCKER_NAME, expected="a Docker name ([a-zA-Z0-9][a-zA-Z0-9_.-]*)"
    )
    image = fields.string("image", expected="an image reference such as repo/name:tag")
    command = fields.get("command")
    if command is _ABSENT or command is None:
        command = None
    elif not isinstance(command, list) or not all(isinstance(part, str) for part in command):
        raise fields.error("command", "a list of strings (one per argument) or null", command)
    environment = fields.get("environment")
    if environment is _ABSENT:
        environment = {}
    if not isinstance(environment, dict):
        raise fields.error("environment", 'an object of NAME: "value" strings', environment)
    for key, value in environment.items():
        if value is not None and not isinstance(value, str):
            raise fields.error(
                f"environment.{key}",
                "a string (quote numbers), or null to pass the variable on from this process",
                value,
            )
    network = fields.string("network", default=None, expected='a Docker network name or "host"')
    ports = _parse_ports(fields)
    if network == "host" and ports:
        raise fields.error(
            "ports",
            'no published ports with "network": "host" (the container uses the host\'s '
            "ports directly)",
            fields.get("ports"),
        )
    volumes = fields.get("volumes")
    if volumes is _ABSENT or volumes is None:
        volumes = []
    if not isinstance(volumes, list) or not all(
        isinstance(item, str) and ":" in item for item in volumes
    ):
        raise fields.error("volumes", 'a list of "source:/container/path[:ro]" strings', volumes)
    return ContainerSpec(
        name=name,
        image=image,
        command=None if command is None else tuple(command),
        environment=dict(environment),
        ports=ports,
        gpus=_parse_gpus(fields),
        network=network,
        volumes=tuple(volumes),
        shm_size=fields.string("shm_size", default=None, expected='a size such as "16g"'),
    )


def _parse_ports(fields: _Fields) -> tuple[PortSpec, ...]:
    raw = fields.get("ports")
    if raw is _ABSENT or raw is None:
        return ()
    expected = 'a list of container ports (8000) or {"container": 8000, "host": 18000} objects'
    if not isinstance(raw, list):
        raise fields.error("ports", expected, raw)
    ports = []
    for index, item in enumerate(raw):
        if isinstance(item, int) and not isinstance(item, bool) and 1 <= item <= 65535:
            ports.append(PortSpec(item))
        elif isinstance(item, dict):
            entry = _Fields(
                item, f"{fields.path('ports')}[{index}]", fields.source, ("container", "host")
            )
            ports.append(
                PortSpec(
                    entry.integer("container", low=1, high=65535),
                    entry.integer("host", low=1, high=65535, default=None),
                )
            )
        else:
            raise fields.error(f"ports[{index}]", expected, item)
    numbers = [port.container_port for port in ports]
    if len(set(numbers)) != len(numbers):
        raise fields.error("ports", "each container port once", raw)
    return tuple(ports)


def _parse_gpus(fields: _Fields) -> str | int | tuple[str, ...] | None:
    value = fields.get("gpus")
    expected = '"all", a positive number of GPUs, or a non-empty list of device ids'
    if value is _ABSENT or value is None:
        return None
    if value == "all":
        return "all"
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, list) and value and all(_device_id(item) for item in value):
        return tuple(str(item) for item in value)
    raise fields.error("gpus", expected, value)


def _device_id(item: Any) -> bool:
    return (isinstance(item, str) and bool(item)) or (
        isinstance(item, int) and not isinstance(item, bool) and item >= 0
    )


def _parse_endpoint(
    top: _Fields, key: str, containers: dict[str, ContainerSpec], *, required: bool
) -> Endpoint | None:
    if top.get(key) in (_ABSENT, None) and not required:
        return None
    fields = top.child(key, ("container", "port"))
    name = fields.string("container", expected=f"one of the container names {sorted(containers)}")
    if name not in containers:
        raise fields.error("container", f"one of the container names {sorted(containers)}", name)
    port = fields.integer("port", low=1, high=65535)
    spec = containers[name]
    published = [p.container_port for p in spec.ports]
    if spec.network != "host" and port not in published:
        raise fields.error("port", f"a port that container {name!r} publishes {published}", port)
    return Endpoint(name, port)


def _parse_readiness(top: _Fields) -> Readiness:
    if top.get("readiness") in (_ABSENT, None):
        return Readiness()
    fields = top.child("readiness", _READINESS_KEYS)
    path = fields.string("path", default="/v1/models", expected='an HTTP path starting with "/"')
    if not path.startswith("/"):
        raise fields.error("path", 'an HTTP path starting with "/"', path)
    expect = fields.string("expect", default="model-listed", expected=f"one of {EXPECTATIONS}")
    if expect not in EXPECTATIONS:
        raise fields.error("expect", f"one of {', '.join(EXPECTATIONS)}", expect)
    return Readiness(
        path=path,
        expect=expect,
        rl_workers=fields.integer("rl_workers", low=0, high=10_000, default=0),
        deadline_s=fields.seconds("deadline_s", 900.0),
        interval_s=fields.seconds("interval_s", 2.0),
    )


# -- the launcher ---------------------------------------------------------------------------


@dataclass
class _Created:
    """A container this launcher created (so `stop()` may remove it)."""

    spec: ContainerSpec
    container: Container
    engine_name: str


class DockerLauncher:
    """Starts a `DockerDeployment` on a Docker engine and removes exactly what it started.

    `base_url` is the engine (`unix:///var/run/docker.sock`, `tcp://host:2376`); None reads the
    environment like the docker CLI does (`DOCKER_HOST`, ...). `log_dir` receives one log file per
    container at teardown (default: a fresh temporary directory, named in `Target.notes`).

    `job` (default: $RL_CONFORMANCE_JOB) adds the label `dynamo-rl-conformance.job=<job>`, so a
    CI job can remove its containers even when the runner killed this process before `stop()`
    ran (see `deploy/github-actions/nightly.yml`). `stop()` itself goes by the run id, which is
    unique per launcher.
    """

    def __init__(
        self,
        deployment: DockerDeployment,
        *,
        base_url: str | None = None,
        log_dir: str | Path | None = None,
        run_id: str | None = None,
        target_id: str | None = None,
        job: str | None = None,
    ) -> None:
        self.deployment = deployment
        self.job = job if job is not None else os.environ.get(JOB_ENV) or None
        self.backend = deployment.backend
        self.target_id = target_id or deployment.name
        self.run_id = run_id or secrets.token_hex(6)
        self.base_url = base_url
        self.log_dir: Path | None = Path(log_dir) if log_dir is not None else None
        self.log_paths: dict[str, Path] = {}
        self._client: docker.DockerClient | None = None
        self._created: list[_Created] = []
        self._network: Any = None
        self._torn_down = False

    # -- public -----------------------------------------------------------------------------

    def start(self) -> Target:
        """Create and start every container, wait for readiness, describe the result. On any
        failure everything created so far is removed (logs are kept) and `LaunchError` raised."""
        if self._client is not None:
            raise LaunchError(f"{self.target_id}: already started (run {self.run_id})")
        began = time.monotonic()
        self._torn_down = False
        try:
            target = self._start()
        except (DockerException, requests.RequestException) as exc:
            self.stop()
            raise LaunchError(f"{self.target_id}: a Docker engine call failed: {exc}") from exc
        except BaseException:
            self.stop()
            raise
        target.notes.append(f"launch to ready: {time.monotonic() - began:.1f} s")
        return target

    def stop(self) -> None:
        """Stop and remove this run's containers (saving their logs first), then its network.
        Never raises: what could not be removed is logged, and a later call retries it."""
        if self._client is None or self._torn_down:
            return
        try:
            problems = self._teardown(self._client)
        except Exception as exc:  # stop() is called from finally blocks: it must not raise
            problems = [f"teardown failed: {exc!r}"]
        for problem in problems:
            logger.warning("%s (run %s): %s", self.target_id, self.run_id, problem)
        if not problems:
            self._torn_down = True
            client, self._client = self._client, None
            try:
                client.close()
            except Exception as exc:
                logger.warning("%s: closing the Docker client failed: %r", self.target_id, exc)

    def engine_name(self, spec: ContainerSpec) -> str:
        return f"{self.deployment.name}-{self.run_id}-{spec.name}"

    # -- start ------------------------------------------------------------------------------

    def _start(self) -> Target:
        if self.log_dir is None:
            self.log_dir = Path(tempfile.mkdtemp(prefix=f"rl-conformance-{self.target_id}-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._client = self._connect()
        engine_version = str(self._client.version().get("Version", "unknown"))
        images = self._images(self._client)
        network_name = self._prepare_network(self._client)
        for spec in self.deployment.containers:
            created = self._create(self._client, spec, network_name)
            created.container.start()
        self._check_running()
        frontend_url = self._url(self.deployment.frontend)
        rl_url = self._url(self.deployment.rl) if self.deployment.rl else None
        self._wait_ready(frontend_url, rl_url)
        return self._target(frontend_url, rl_url, engine_version, images)

    def _connect(self) -> docker.DockerClient:
        where = self.base_url or "the engine named by DOCKER_HOST (default /var/run/docker.sock)"
        try:
            if self.base_url:
                return docker.DockerClient(base_url=self.base_url)
            return docker.from_env()
        except DockerException as exc:
            raise LaunchError(f"{self.target_id}: cannot reach {where}: {exc}") from exc

    def _images(self, client: docker.DockerClient) -> dict[str, Any]:
        images: dict[str, Any] = {}
        for spec in self.deployment.containers:
            if spec.image in images:
                continue
            if self.deployment.pull:
                images[spec.image] = client.images.pull(spec.image)
                continue
            try:
                images[spec.image] = client.images.get(spec.image)
            except ImageNotFound:
                raise LaunchError(
                    f"{self.target_id}: image {spec.image} (container {spec.name}) is not on the "
                    'Docker host and "pull" is false: pull it first or set "pull": true'
                ) from None
        return images

    def _prepare_network(self, client: docker.DockerClient) -> str | None:
        spec = self.deployment.network
        if spec is None:
            return None
        if not spec.create:
            return spec.name
        self._network = client.networks.create(
            f"{self.deployment.name}-{self.run_id}", driver="bridge", labels=self._labels(None)
        )
        return str(self._network.name)

    def _labels(self, spec: ContainerSpec | None) -> dict[str, str]:
        labels = {RUN_LABEL: self.run_id, DEPLOYMENT_LABEL: self.deployment.name}
        if self.job:
            labels[JOB_LABEL] = self.job
        if spec is not None:
            labels[ROLE_LABEL] = spec.name
        return labels

    def _create(
        self, client: docker.DockerClient, spec: ContainerSpec, network_name: str | None
    ) -> _Created:
        kwargs: dict[str, Any] = {
            "name": self.engine_name(spec),
            "environment": spec.environment_for_engine(),
            "labels": self._labels(spec),
        }
        if spec.ports:
            kwargs["ports"] = {
                f"{port.container_port}/tcp": (self.deployment.host_ip, port.host_port)
                for port in spec.ports
            }
        if spec.gpus is not None:
            kwargs["device_requests"] = spec.device_requests()
        if spec.volumes:
            kwargs["volumes"] = list(spec.volumes)
        if spec.shm_size:
            kwargs["shm_size"] = spec.shm_size
        network = spec.network or network_name
        if network:
            kwargs["network"] = network
            if network not in _SPECIAL_NETWORKS and not network.startswith("container:"):
                kwargs["networking_config"] = {
                    network: client.api.create_endpoint_config(aliases=[spec.name])
                }
        command = list(spec.command) if spec.command is not None else None
        container = client.containers.create(spec.image, command=command, **kwargs)
        created = _Created(spec, container, kwargs["name"])
        self._created.append(created)
        return created

    def _check_running(self) -> None:
        """Fail fast, with the log tail, when a container has already exited."""
        for created in self._created:
            created.container.reload()
            status = created.container.status
            if status in ("exited", "dead"):
                code = created.container.attrs.get("State", {}).get("ExitCode")
                raise LaunchError(
                    f"{self.target_id}: container {created.spec.name} ({created.engine_name}) "
                    f"{status} with code {code} during start-up; last {LOG_TAIL_LINES} log lines:"
                    f"\n{self._tail(created)}\n(full logs: {self.log_dir})"
                )

    def _url(self, endpoint: Endpoint) -> str:
        created = next(c for c in self._created if c.spec.name == endpoint.container)
        if created.spec.network == "host":
            return f"http://{_url_host(self.deployment.url_host or '127.0.0.1')}:{endpoint.port}"
        created.container.reload()
        settings = created.container.attrs.get("NetworkSettings") or {}
        for binding in (settings.get("Ports") or {}).get(f"{endpoint.port}/tcp") or []:
            if binding.get("HostPort"):
                host = self.deployment.url_host or binding.get("HostIp") or self.deployment.host_ip
                return f"http://{_url_host(host)}:{binding['HostPort']}"
        raise LaunchError(
            f"{self.target_id}: container {endpoint.container} has no published host port for "
            f"{endpoint.port}/tcp (engine reports {settings.get('Ports')!r})"
        )

    def _wait_ready(self, frontend_url: str, rl_url: str | None) -> None:
        readiness = self.deployment.readiness
        deadline = time.monotonic() + readiness.deadline_s
        last = "nothing probed yet"
        with httpx.Client(trust_env=False) as http:
            while True:
                self._check_running()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                ready, last = self._probe(http, frontend_url, rl_url, min(5.0, remaining))
                if ready:
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                time.sleep(min(readiness.interval_s, remaining))
        tails = "\n".join(
            f"--- {c.spec.name} ({c.engine_name}), last {LOG_TAIL_LINES} lines ---\n{self._tail(c)}"
            for c in self._created
        )
        raise LaunchError(
            f"{self.target_id}: not ready within {readiness.deadline_s:g} s (last probe: {last})"
            f"\n{tails}\n(full logs: {self.log_dir})"
        )

    def _probe(
        self, http: httpx.Client, frontend_url: str, rl_url: str | None, timeout: float
    ) -> tuple[bool, str]:
        readiness = self.deployment.readiness
        url = frontend_url + readiness.path
        try:
            response = http.get(url, timeout=timeout)
        except httpx.HTTPError as exc:
            return False, f"GET {url}: {type(exc).__name__} {exc}"
        if response.status_code != 200:
            return False, f"GET {url} -> HTTP {response.status_code}"
        if readiness.expect == "model-listed":
            listed = _listed_models(response)
            wanted = self.deployment.model
            if not listed or (wanted is not None and wanted not in listed):
                return False, f"GET {url} lists models {listed} (waiting for {wanted or 'one'})"
        if readiness.rl_workers and rl_url is not None:
            url = rl_url + "/v1/rl/workers"
            try:
                response = http.get(url, timeout=timeout)
            except httpx.HTTPError as exc:
                return False, f"GET {url}: {type(exc).__name__} {exc}"
            usable = _usable_rl_workers(response)
            if usable < readiness.rl_workers:
                return False, (
                    f"GET {url} -> HTTP {response.status_code}, {usable} usable worker(s) "
                    f"of {readiness.rl_workers}"
                )
        return True, "ready"

    def _tail(self, created: _Created) -> str:
        try:
            data = created.container.logs(stdout=True, stderr=True, tail=LOG_TAIL_LINES)
        except Exception as exc:
            return f"(logs unavailable: {exc})"
        return bytes(data).decode("utf-8", errors="replace").rstrip("\n") or "(no output)"

    def _target(
        self, frontend_url: str, rl_url: str | None, engine_version: str, images: dict[str, Any]
    ) -> Target:
        versions = {"docker.engine": engine_version}
        notes = []
        for created in self._created:
            spec = created.spec
            image = images[spec.image]
            versions[f"{spec.name}.image"] = spec.image
            versions[f"{spec.name}.image_id"] = str(image.id)
            digests = image.attrs.get("RepoDigests") or []
            if digests:
                versions[f"{spec.name}.image_digest"] = ", ".join(map(str, digests))
            if spec.command is not None:
                command = shlex.join(spec.command)
            else:
                default = (image.attrs.get("Config") or {}).get("Cmd") or []
                command = f"(image default) {shlex.join(map(str, default))}"
            gpus = "" if spec.gpus is None else f" --gpus {_gpus_flag(spec.gpus)}"
            notes.append(f"{spec.name}: {created.engine_name}{gpus} {spec.image} {command}")
        notes.append(f"docker run id {self.run_id} (label {RUN_LABEL}={self.run_id})")
        notes.append(f"container logs: {self.log_dir} (written at teardown)")
        return Target(
            id=self.target_id,
            backend=self.backend,
            kind="docker",
            frontend_url=frontend_url,
            rl_url=rl_url,
            model=self.deployment.model,
            versions=versions,
            notes=notes,
        )

    # -- stop -------------------------------------------------------------------------------

    def _teardown(self, client: docker.DockerClient) -> list[str]:
        problems: list[str] = []
        removed: set[str] = set()
        for created in reversed(list(self._created)):
            if self._remove_container(created.container, created.engine_name, problems):
                removed.add(created.container.id)
                self._created.remove(created)
        selector = {"label": f"{RUN_LABEL}={self.run_id}"}
        try:
            leftovers = client.containers.list(all=True, filters=selector, sparse=True)
        except Exception as exc:
            problems.append(f"could not list containers labelled {selector['label']}: {exc}")
            leftovers = []
        for container in leftovers:
            labels = container.attrs.get("Labels") or {}
            if container.id in removed or labels.get(RUN_LABEL) != self.run_id:
                continue
            names = container.attrs.get("Names") or [container.id]
            self._remove_container(container, str(names[0]).lstrip("/"), problems)
        networks = [self._network] if self._network is not None else []
        try:
            networks += client.networks.list(filters=selector)
        except Exception as exc:
            problems.append(f"could not list networks labelled {selector['label']}: {exc}")
        done: set[str] = set()
        for network in networks:
            labels = network.attrs.get("Labels") or {}
            if network.id in done or labels.get(RUN_LABEL) != self.run_id:
                continue
            done.add(network.id)
            try:
                network.remove()
            except NotFound:
                pass
            except Exception as exc:
                problems.append(f"could not remove network {network.name} ({network.id}): {exc}")
                continue
            if self._network is not None and network.id == self._network.id:
                self._network = None
        return problems

    def _remove_container(self, container: Container, name: str, problems: list[str]) -> bool:
        """Stop (gracefully, so GPUs are released cleanly), save the logs, remove."""
        try:
            container.stop(timeout=max(1, round(self.deployment.stop_timeout_s)))
        except NotFound:
            return True
        except Exception as exc:
            problems.append(f"could not stop container {name} ({container.id}): {exc}")
        self._save_logs(container, name, problems)
        try:
            container.remove(v=True, force=True)
        except NotFound:
            return True
        except Exception as exc:
            problems.append(f"could not remove container {name} ({container.id}): {exc}")
            return False
        return True

    def _save_logs(self, container: Container, name: str, problems: list[str]) -> None:
        if self.log_dir is None:
            return
        path = self.log_dir / f"{name}.log"
        try:
            path.write_bytes(bytes(container.logs(stdout=True, stderr=True)))
        except NotFound:
            return
        except Exception as exc:
            problems.append(f"could not save the logs of {name} to {path}: {exc}")
            return
        self.log_paths[name] = path


def _listed_models(response: httpx.Response) -> list[str]:
    try:
        data = response.json().get("data", [])
        return [str(entry["id"]) for entry in data]
    except (ValueError, AttributeError, KeyError, TypeError):
        return []


def _usable_rl_workers(response: httpx.Response) -> int:
    if response.status_code != 200:
        return 0
    try:
        workers = response.json().get("workers", [])
        return sum(1 for w in workers if w.get("routes") and not w.get("error"))
    except (ValueError, AttributeError, TypeError):
        return 0


def _url_host(host: str) -> str:
    """A host for URLs: wildcard binds are reached on loopback, IPv6 literals need brackets."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def _gpus_flag(gpus: str | int | tuple[str, ...]) -> str:
    if isinstance(gpus, tuple):
        return f'"device={",".join(gpus)}"'
    return str(gpus)


def launcher_from_config(
    path: str,
    *,
    log_dir: str | Path | None = None,
    base_url: str | None = None,
    run_id: str | None = None,
) -> DockerLauncher:
    """For the CLI (`--launch docker --docker-config PATH`): the config is read and validated
    now, so a bad file fails before anything starts; the engine is contacted only by `start()`."""
    return DockerLauncher(
        DockerDeployment.from_file(path), base_url=base_url, log_dir=log_dir, run_id=run_id
    )
