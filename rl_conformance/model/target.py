"""What the suite knows about one deployment under test, and the interface of the launchers
that produce one (see `rl_conformance.launchers`).

A target holds only what a user of a real deployment could tell the suite (URLs, backend, model,
the system URLs of workers that discovery does not list) plus, for deployments we launched
ourselves, a `Probe`: the one declared door to channels no real deployment offers. Suites reach a
probe through the `needs` marker, never by URL, so a verdict cannot silently depend on it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..errors import ConfigurationError
from .capabilities import Backend
from .releases import MAIN, UNKNOWN_SOURCE

LISTENER_RESTART = "listener_restart"
COLD_START = "cold_start"
WORKER_DEPARTURE = "worker_departure"
PROBE_REPLY = "probe_reply"
ENGINE_RECOVERY = "engine_recovery"
WORKER_KILL = "worker_kill"
CHANNELS: Mapping[str, str] = {
    LISTENER_RESTART: "restarts the RL listener under a chosen environment",
    COLD_START: "starts the same deployment again, fresh, on a checkpoint",
    WORKER_DEPARTURE: "stops one worker's process and starts it again",
    PROBE_REPLY: "makes one worker answer the RL listener's route probe with a chosen reply, or "
    "not at all",
    ENGINE_RECOVERY: "kills one worker's engine for its sidecar to restart",
    WORKER_KILL: "kills one worker's process (SIGKILL) while it generates and starts it again",
}
"""Channels a probe may offer: what a test that needs one does to the deployment."""
TOY_LAUNCHES = ("--launch dynamo-fake-vllm", "--launch dynamo-fake-sglang")
OFFERED_BY: Mapping[str, tuple[str, ...]] = {
    LISTENER_RESTART: ("--fake NAME", "--launch dynamo-*"),
    COLD_START: ("--fake vllm", "--fake sglang"),
    WORKER_DEPARTURE: ("--fake NAME", *TOY_LAUNCHES),
    PROBE_REPLY: ("--fake NAME",),
    ENGINE_RECOVERY: ("--fake NAME",),
    WORKER_KILL: ("--fake NAME", *TOY_LAUNCHES),
}
"""The deployments the suite launches that offer each channel, as a user asks for them."""


def judged_only_where_offered(missing: Sequence[str]) -> str:
    """What a cell says when its deployment lacks channels its test needs, in plain words:
    where the test is judged (the launches offering them all) and what it does there."""
    offered = [
        launch
        for launch in OFFERED_BY[missing[0]]
        if all(launch in OFFERED_BY[name] for name in missing)
    ]
    return (
        f"judged only on a deployment the suite launches ({', '.join(offered)}): the test "
        + " and ".join(CHANNELS[name] for name in missing)
    )


class Probe(Protocol):
    """Fake-only channels of a launched deployment."""

    offers: frozenset[str]

    def rescope_listener(self, env: Mapping[str, str]) -> None:
        """Restart (or re-read) the RL listener with these namespace variables only."""


class WorkerDepartureProbe(Probe, Protocol):
    """A probe that offers `WORKER_DEPARTURE`."""

    def depart_worker(self) -> None:
        """Stop the process of the deployment's last worker (it does not come back by itself)."""

    def return_worker(self) -> None:
        """Start the departed worker again (the same system URL; a new instance id may follow)."""


class ProbeReplyProbe(Probe, Protocol):
    """A probe that offers `PROBE_REPLY` (and `LISTENER_RESTART`)."""

    def replace_probe_reply(self, reply: Any) -> int:
        """The deployment's last worker answers the listener's route probe with `reply` (any
        JSON value); its instance id."""

    def hang_probe_reply(self) -> int:
        """The last worker never answers the listener's route probe; its instance id."""

    def restore_probe_reply(self) -> None:
        """The last worker answers with its own reply again."""


class EngineRecoveryProbe(Probe, Protocol):
    """A probe that offers `ENGINE_RECOVERY`."""

    def crash_engine(self, instance_id: int) -> None:
        """Kill the engine of worker `instance_id` under whatever it is generating; its sidecar
        starts it again by itself."""


class WorkerKillProbe(Probe, Protocol):
    """A probe that offers `WORKER_KILL`."""

    def kill_worker(self, system_url: str) -> None:
        """Kill (SIGKILL) the process of the worker serving `system_url`, under whatever it is
        generating."""

    def revive_worker(self, system_url: str) -> None:
        """Start the killed worker again, as it was started; discovery is the caller's to
        watch."""


@runtime_checkable
class WorkerWatch(Protocol):
    """A launcher that knows its workers' processes by their system URLs."""

    def worker_exit(self, system_url: str) -> tuple[int, str] | None:
        """The exit code and last log lines of the process serving `system_url`, once it
        exited; None while it runs (or when no process of the launcher serves that URL)."""

    def worker_log(self, system_url: str) -> str:
        """The log of the process serving `system_url` so far ("" when there is none)."""

    def restart_worker(self, system_url: str) -> None:
        """Start the worker serving `system_url` again, as it was started, and wait until it
        serves; `LaunchError` when it does not."""


class ColdStartProbe(Probe, Protocol):
    """A probe that offers `COLD_START`."""

    def cold_start_probe(self, model_path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Start the same kind of deployment fresh on the checkpoint `model_path`, POST `body`
        to its /v1/completions (the model named for it), and return the JSON response; the
        deployment is always stopped."""


@dataclass
class Target:
    """One deployment. `model` may be None until resolved from `/v1/models`. `worker_urls` are
    system URLs of workers that discovery does not list (`--worker-url`; SGLang and TensorRT-LLM
    workers do not register with /v1/rl/workers)."""

    id: str
    backend: str
    kind: str
    frontend_url: str
    rl_url: str | None = None
    model: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    """Component -> version: what the launcher started and what the deployment published
    (`plan.record_versions`); `version_sources` says where each was read."""
    notes: list[str] = field(default_factory=list)
    worker_urls: tuple[str, ...] = ()
    probe: Probe | None = None
    release: str = MAIN
    """The Dynamo release the deployment runs, and the basis its capabilities are judged on
    (`releases.judged_as`); `main` (the release the spec documents) when not known."""
    release_source: str = UNKNOWN_SOURCE
    """How `release` is known (`releases.RELEASE_SOURCES`): observed from the deployment, given
    by the launcher, declared with --dynamo-release, or unknown (then `main` is only the basis
    of judging, never a claim)."""
    topology: dict[str, Any] = field(default_factory=dict)
    """What the deployment shows of itself when first reached (`plan.record_topology`)."""
    version_sources: dict[str, str] = field(default_factory=dict)
    """Key of `versions` -> where that value came from (a launcher, or the request and field
    the deployment published it in)."""
    update_model_paths: tuple[str, ...] = ()
    """Checkpoints a launcher made for this deployment's updates: what a user gives with
    `--update-model-path` (which, when given, wins)."""
    request_trace: str | None = None
    """Where the frontend writes its request trace (`dynamo.request.trace.v1` file sink): a
    launcher that turned it on, or `--request-trace`."""
    eos_token_ids: tuple[int, ...] = ()
    """The model's end-of-sequence ids: from the model directory a launcher served, or
    `--eos-token-id`; () when not known."""
    migration_limit: int | None = None
    """How many times the frontend moves a request whose worker died to another worker (its
    `--migration-limit`): what a launcher started it with; None when not known."""
    unreached: str | None = None
    """Why the run could not test this deployment at all (it did not start, an input is wrong
    for it, its frontend did not answer the preflight): every cell it has is that one cause."""
    unreached_kind: str | None = None
    """What kind of cause `unreached` is (`comparability.TARGET_CAUSES`: the preflight refused
    an input, a plane refused the credentials, or the deployment was not reached)."""

    @property
    def offers(self) -> frozenset[str]:
        return self.probe.offers if self.probe is not None else frozenset()

    def observe(self, key: str, value: str, source: str) -> None:
        """Record a version and its source; what is already recorded under `key` stays."""
        if key not in self.versions:
            self.versions[key] = value
            self.version_sources[key] = source

    def url(self, path: str) -> str:
        return self.frontend_url.rstrip("/") + path

    def rl(self, path: str) -> str:
        if not self.rl_url:
            raise ConfigurationError(f"target {self.id} has no RL listener URL (--rl-url)")
        return self.rl_url.rstrip("/") + path

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "backend": self.backend,
            "kind": self.kind,
            "frontend_url": self.frontend_url,
            "rl_url": self.rl_url,
            "model": self.model,
            "versions": dict(self.versions),
            "version_sources": dict(self.version_sources),
            "notes": list(self.notes),
            "worker_urls": list(self.worker_urls),
            "dynamo_release": self.release,
            "dynamo_release_source": self.release_source,
            "topology": dict(self.topology),
            "request_trace": self.request_trace,
            "eos_token_ids": list(self.eos_token_ids),
            "migration_limit": self.migration_limit,
            **({"unreached": self.unreached} if self.unreached else {}),
            **({"unreached_kind": self.unreached_kind} if self.unreached_kind else {}),
        }

    @classmethod
    def from_description(cls, document: Mapping[str, Any]) -> Target:
        """The inverse of `describe` (without a probe: that stays with the launcher)."""
        return cls(
            id=document["id"],
            backend=document["backend"],
            kind=document["kind"],
            frontend_url=document["frontend_url"],
            rl_url=document.get("rl_url"),
            model=document.get("model"),
            versions=dict(document.get("versions", {})),
            version_sources=dict(document.get("version_sources", {})),
            notes=list(document.get("notes", [])),
            worker_urls=tuple(document.get("worker_urls", [])),
            release=document.get("dynamo_release", MAIN),
            release_source=document.get("dynamo_release_source", UNKNOWN_SOURCE),
            topology=dict(document.get("topology", {})),
            request_trace=document.get("request_trace"),
            eos_token_ids=tuple(document.get("eos_token_ids", ())),
            migration_limit=document.get("migration_limit"),
            unreached=document.get("unreached"),
            unreached_kind=document.get("unreached_kind"),
        )


class Launcher(Protocol):
    target_id: str
    backend: str
    kind: ClassVar[str]
    """The `Target.kind` of what it starts ("fake" for our own fakes)."""
    starts_cheaply: ClassVar[bool]
    """Whether a second deployment of its kind costs about a second and nothing of the user's."""

    def prepare(self, stack: contextlib.ExitStack) -> None:
        """Work every deployment of its kind repeats, done once: a run calls it before pytest
        starts (a parallel run's children inherit the result). What it leaves running is
        stopped when `stack` closes, after the tests have ended."""

    def start(self) -> Target: ...

    def stop(self) -> None: ...


def check_backend(value: str) -> str:
    try:
        return Backend(value).value
    except ValueError:
        raise ConfigurationError(
            f"--backend: expected one of {', '.join(b.value for b in Backend)}, observed {value!r}"
        ) from None


def check_url(flag: str, url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"{flag}: expected an http(s) URL, observed {url!r}")
    return url
