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

import contextlib
import logging
import os
import re
import secrets
import shlex
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import docker
import httpx
import requests
from docker.errors import DockerException, ImageNotFound, NotFound
from docker.models.containers import Container
from docker.types import DeviceRequest

from ..client.network import Network
from ..errors import LaunchError
from ..model.releases import DOCKER_CONFIG_SOURCE, MAIN, UNKNOWN_SOURCE
from ..model.target import Target
from ..redaction import write_bytes
from .docker_config import (
    ContainerSpec,
    DockerDeployment,
    Endpoint,
    NetworkSpec,
    PortSpec,
    Readiness,
)
from .readiness import wait_until_ready

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
    "device_requests",
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

    kind: ClassVar[str] = "docker"
    """What its targets' `Target.kind` is."""
    starts_cheaply: ClassVar[bool] = False

    def __init__(
        self,
        deployment: DockerDeployment,
        *,
        base_url: str | None = None,
        log_dir: str | Path | None = None,
        run_id: str | None = None,
        target_id: str | None = None,
        job: str | None = None,
        network: Network | None = None,
    ) -> None:
        self.deployment = deployment
        self.network = network
        """How its readiness probes reach the deployment (the run's certificates and proxies:
        a Docker host may be another machine)."""
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

    def prepare(self, stack: contextlib.ExitStack) -> None:
        return None

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
        named = os.environ.get("DOCKER_HOST")
        where = self.base_url or (
            f"the Docker engine at DOCKER_HOST={named}"
            if named
            else "the Docker engine at /var/run/docker.sock (DOCKER_HOST is unset)"
        )
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
            kwargs["device_requests"] = device_requests(spec)
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

        def tails() -> str:
            shown = "\n".join(
                f"--- {c.spec.name} ({c.engine_name}), last {LOG_TAIL_LINES} lines ---\n"
                f"{self._tail(c)}"
                for c in self._created
            )
            return f"{shown}\n(full logs: {self.log_dir})"

        wait_until_ready(
            self.target_id,
            lambda http: self._probe(http, frontend_url, rl_url),
            deadline_s=readiness.deadline_s,
            interval_s=readiness.interval_s,
            alive=self._check_running,
            details=tails,
            network=self.network,
        )

    def _probe(self, http: httpx.Client, frontend_url: str, rl_url: str | None) -> tuple[bool, str]:
        readiness = self.deployment.readiness
        url = frontend_url + readiness.path
        try:
            response = http.get(url)
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
                response = http.get(url)
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
            kind=self.kind,
            frontend_url=frontend_url,
            rl_url=rl_url,
            model=self.deployment.model,
            versions=versions,
            notes=notes,
            release=self.deployment.dynamo_release or MAIN,
            release_source=DOCKER_CONFIG_SOURCE
            if self.deployment.dynamo_release
            else UNKNOWN_SOURCE,
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
            write_bytes(path, bytes(container.logs(stdout=True, stderr=True)))
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


def device_requests(spec: ContainerSpec) -> list[DeviceRequest]:
    """`docker run --gpus` as the engine API spells it."""
    if spec.gpus is None:
        return []
    if spec.gpus == "all":
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    if isinstance(spec.gpus, int):
        return [DeviceRequest(count=spec.gpus, capabilities=[["gpu"]])]
    return [DeviceRequest(device_ids=list(spec.gpus), capabilities=[["gpu"]])]


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
    network: Network | None = None,
) -> DockerLauncher:
    """For the CLI (`--launch docker --docker-config PATH`): the config is read and validated
    now, so a bad file fails before anything starts; the engine is contacted only by `start()`."""
    return DockerLauncher(
        DockerDeployment.from_file(path),
        base_url=base_url,
        log_dir=log_dir,
        run_id=run_id,
        network=network,
    )
