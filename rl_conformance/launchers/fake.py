"""Our fake deployment, started as `python -m fake_backends` on ephemeral loopback ports."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

from ..client.http11 import WireError
from ..client.pool import Answer, fetch
from ..errors import LaunchError
from ..model.target import (
    COLD_START,
    ENGINE_RECOVERY,
    LISTENER_RESTART,
    PROBE_REPLY,
    WORKER_DEPARTURE,
    WORKER_KILL,
    Target,
    check_backend,
)
from . import fake_zygote
from .fake_zygote import ForkedFake
from .model_dir import eos_token_ids
from .tracing import REQUEST_TRACE_FILE, request_trace_environment

Process = subprocess.Popen[bytes] | ForkedFake

DEFAULT_MIGRATION_LIMIT = 3
"""Upstream's suggested starting value ("Start with 3", Dynamo's request migration guide)."""

READY_TIMEOUT_S = 30.0
CONTROL_TIMEOUT_S = 10.0
COLD_START_REQUEST_TIMEOUT_S = 30.0
# Backends whose workers discovery does not list: their users give each worker's system URL
# with --worker-url, so the launcher hands the suite exactly that, and nothing more.
UNREGISTERED = ("sglang", "trtllm")
# Our fake deployments by name: the backend and the extra `python -m fake_backends` arguments.
FLAVOURS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "vllm": ("vllm", ()),
    # SGLang's cache reset is reachable only where the deployment allowlists it, as the real
    # engines' launch does (`real_engines.SGLANG_ROUTES`)
    "sglang": ("sglang", ("--engine-route", "flush_cache:tm")),
    "trtllm": ("trtllm", ()),
    "vllm-sidecar": ("vllm", ("--admin-family", "sidecar")),
}

# Fakes whose updates load a checkpoint from disk: a fresh start of the same fake on that
# checkpoint (`--initial-model-path`) is the reference an update from it must reach.
COLD_STARTS = frozenset({"vllm", "sglang"})


@dataclass(frozen=True)
class ControlPortProbe:
    """The fake-only channels of a launched fake: its loopback control port, and (`flavour` in
    `COLD_STARTS`) a fresh fake of the same flavour started on a checkpoint."""

    control_url: str
    offers: frozenset[str] = frozenset({LISTENER_RESTART})
    flavour: str | None = None

    @classmethod
    def of(cls, control_url: str, flavour: str) -> ControlPortProbe:
        offers = {LISTENER_RESTART, WORKER_DEPARTURE, PROBE_REPLY, ENGINE_RECOVERY, WORKER_KILL}
        offers |= {COLD_START} if flavour in COLD_STARTS else set()
        return cls(control_url, frozenset(offers), flavour)

    def cold_start_probe(self, model_path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Start `python -m fake_backends` of this flavour (one worker, no faults) on
        `model_path`, POST `body` to its /v1/completions and return the JSON; always stopped."""
        if COLD_START not in self.offers or self.flavour is None:
            raise LaunchError(f"this fake ({self.flavour}) offers no {COLD_START} channel")
        from fake_backends.deployment.options import command_line

        launcher = FakeLauncher(
            self.flavour,
            workers=1,
            target_id=f"cold-start-{self.flavour}",
            extra_args=(*command_line(initial_model_path=model_path), "--port", "0"),
        )
        try:
            fresh = launcher.start()
            request = {**body, "model": fresh.model or _served_model(fresh)}
            reply = _post(fresh.url("/v1/completions"), request)
            if reply.status != 200:
                raise LaunchError(
                    f"the cold start on {model_path} answered the probe with HTTP "
                    f"{reply.status}: {reply.text[:300]}"
                )
            try:
                answer = reply.json()
            except ValueError as exc:
                raise LaunchError(
                    f"the cold start on {model_path} answered no JSON: {reply.text[:300]!r}"
                ) from exc
            if not isinstance(answer, dict):
                raise LaunchError(f"the cold start on {model_path} answered {answer!r}")
            return answer
        finally:
            launcher.stop()
            if launcher.log_path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(launcher.log_path)

    def depart_worker(self) -> None:
        self._departure(True)

    def return_worker(self) -> None:
        self._departure(False)

    def _departure(self, departed: bool) -> None:
        self._control("/departure", {"departed": departed}, "the worker's departure was refused")

    def kill_worker(self, system_url: str) -> None:
        self._worker_kill(system_url, True)

    def revive_worker(self, system_url: str) -> None:
        self._worker_kill(system_url, False)

    def _worker_kill(self, system_url: str, killed: bool) -> None:
        body = {"system_url": system_url, "killed": killed}
        self._control("/worker_kill", body, f"the worker at {system_url} was not killed/revived")

    def crash_engine(self, instance_id: int) -> None:
        self._control("/engine_crash", {"instance_id": instance_id}, "the engine did not crash")

    def replace_probe_reply(self, reply: Any) -> int:
        return self._probe_reply({"reply": reply})

    def hang_probe_reply(self) -> int:
        return self._probe_reply({"hang": True})

    def restore_probe_reply(self) -> None:
        self._probe_reply({})

    def _probe_reply(self, body: Mapping[str, Any]) -> int:
        answer = self._control("/probe_reply", body, "the worker's probe reply was not replaced")
        return int(answer["instance_id"])

    def _control(self, path: str, body: Mapping[str, Any], refused: str) -> Any:
        """POST to the fake's control port and return its JSON answer; a LaunchError naming
        `refused` unless it says 200."""
        try:
            reply = fetch(
                "POST",
                f"{self.control_url}{path}",
                json_body=dict(body),
                deadline_s=CONTROL_TIMEOUT_S,
            )
        except WireError as exc:
            raise LaunchError(f"the fake's control port did not answer: {exc}") from exc
        if reply.status != 200:
            raise LaunchError(f"{refused}: HTTP {reply.status} {reply.text[:200]}")
        return reply.json()

    def rescope_listener(self, env: Mapping[str, str]) -> None:
        self._control("/listener_env", {"env": dict(env)}, "the listener cannot be re-scoped")


@functools.cache
def fake_model_eos_ids() -> tuple[int, ...]:
    """The EOS ids the fakes' model directory declares, read from the directory fake_backends
    writes (as the Dynamo launcher serves it), once per process (about 70 ms: the tokenizer's
    whole vocabulary; `prepare` does it before a parallel run forks); () when it cannot be
    written. Written here, not by a `python -m fake_backends.model.directory` of its own: the
    same files, without a second interpreter's start for each deployment launched."""
    from fake_backends.model.directory import write_model_dir

    with tempfile.TemporaryDirectory(prefix="rl-conformance-model-") as directory:
        try:
            write_model_dir(Path(directory))
        except OSError:
            return ()
        return eos_token_ids(Path(directory))


@dataclass
class FakeLauncher:
    """Our fake deployment, started as `python -m fake_backends` on ephemeral loopback ports.
    `flavour` names it (`FLAVOURS`: a backend, or vLLM with the native sidecar's routes)."""

    kind: ClassVar[str] = "fake"
    """What its targets' `Target.kind` is."""
    starts_cheaply: ClassVar[bool] = True
    """A second deployment of the same kind starts in about a second and holds nothing of the
    user's: a parallel run may test it as several (`plugin.balance`)."""

    flavour: str
    workers: int = 2
    faults: tuple[str, ...] = ()
    target_id: str = ""
    extra_args: tuple[str, ...] = ()
    """More `python -m fake_backends` options (benchmarks: `--engine-call-delay-ms`)."""
    migration_limit: int = DEFAULT_MIGRATION_LIMIT
    """The fake frontend's `--migration-limit`: the suite's fakes play a deployment that moves a
    request whose worker died (Dynamo's own default is 0, `python -m fake_backends`'s too)."""
    log_dir: Path | None = None
    """Where the fake's log goes (`<target id>.log`, appended to on each start): a run's report
    directory. None: a temporary file, removed when the fake stops."""
    _process: Process | None = None
    log_path: str | None = None
    trace_path: Path | None = None

    def __post_init__(self) -> None:
        if self.flavour not in FLAVOURS:
            raise LaunchError(
                f"unknown fake deployment {self.flavour!r}; expected one of {', '.join(FLAVOURS)}"
            )
        self.target_id = self.target_id or f"fake-{self.flavour}"

    @property
    def backend(self) -> str:
        return check_backend(FLAVOURS[self.flavour][0])

    def command(self) -> list[str]:
        # The flags of the fakes' own option table (imported here: the run needs the fakes
        # only when it starts one).
        from fake_backends.deployment.options import command_line

        command = [
            sys.executable,
            "-m",
            "fake_backends",
            self.backend,
            *FLAVOURS[self.flavour][1],
            "--host",
            "127.0.0.1",
            *command_line(workers=self.workers),
        ]
        for fault in self.faults:
            command += ["--fault", fault]
        command += command_line(migration_limit=self.migration_limit)
        return command + list(self.extra_args)

    def prepare(self, stack: contextlib.ExitStack) -> None:
        fake_zygote.started(stack)  # first: it imports the fakes while the EOS ids are read
        fake_model_eos_ids()

    def start(self) -> Target:
        self.trace_path = self._trace_path()
        env = dict(os.environ, PYTHONUNBUFFERED="1", **request_trace_environment(self.trace_path))
        with self._open_log() as log:
            self.log_path = log.name
            self._process = self._spawn(env, log)
        eos_ids = fake_model_eos_ids()  # while the deployment starts
        line = _read_ready_line(self._process, READY_TIMEOUT_S, self.log_path)
        try:
            ready = json.loads(line)
            worker_urls = (
                tuple(w["system_url"] for w in ready.get("workers", []) if w.get("system_url"))
                if self.backend in UNREGISTERED
                else ()
            )
            target = Target(
                id=self.target_id,
                backend=self.backend,
                kind=self.kind,
                frontend_url=ready["frontend"],
                rl_url=ready.get("rl"),
                model=ready.get("model"),
                worker_urls=worker_urls,
                probe=ControlPortProbe.of(ready["control"], self.flavour),
                versions={"fake_backends": "in-tree"},
                notes=self._notes(),
                request_trace=str(self.trace_path),
                eos_token_ids=eos_ids,
                migration_limit=self.migration_limit,
            )
        except (ValueError, KeyError, TypeError) as exc:
            self.stop()
            raise LaunchError(
                f"fake_backends printed an unusable ready line {line!r}: {exc}"
            ) from exc
        return target

    def _spawn(self, env: dict[str, str], log: IO[bytes]) -> Process:
        """Forked from the run's zygote where there is one (`fake_zygote`), else started."""
        command = self.command()
        zygote = fake_zygote.current()
        if zygote is not None:
            with contextlib.suppress(LaunchError):
                return zygote.spawn(command[3:], env, log)
        return subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, env=env
        )

    def _notes(self) -> list[str]:
        notes = (
            [f"fake_backends {' '.join(FLAVOURS[self.flavour][1])}"]
            if FLAVOURS[self.flavour][1]
            else []
        )
        return notes + ([f"faults: {', '.join(self.faults)}"] if self.faults else [])

    def _trace_path(self) -> Path:
        """Beside the log in a report directory (evidence); else a temporary file."""
        if self.log_dir is None:
            handle, name = tempfile.mkstemp(prefix=f"{self.target_id}-", suffix=".trace.jsonl")
            os.close(handle)
            return Path(name)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return self.log_dir / f"{self.target_id}.{REQUEST_TRACE_FILE}"

    def _open_log(self) -> IO[bytes]:
        if self.log_dir is None:
            return tempfile.NamedTemporaryFile(
                prefix=f"{self.target_id}-", suffix=".log", delete=False
            )
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return open(self.log_dir / f"{self.target_id}.log", "ab")

    def stop(self) -> None:
        process, self._process = self._process, None
        try:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=5)
        finally:
            if process is not None and process.stdout is not None:
                process.stdout.close()
            if self.log_dir is None:
                for path in (self.log_path, self.trace_path):
                    if path is not None:
                        with contextlib.suppress(OSError):
                            os.unlink(path)


def _post(url: str, body: Mapping[str, Any]) -> Answer:
    try:
        return fetch("POST", url, json_body=dict(body), deadline_s=COLD_START_REQUEST_TIMEOUT_S)
    except WireError as exc:
        raise LaunchError(f"the cold-started fake did not answer {url}: {exc}") from exc


def _served_model(target: Target) -> str:
    """The model a fake serves, from its /v1/models (when the ready line names none)."""
    try:
        reply = fetch("GET", target.url("/v1/models"), deadline_s=CONTROL_TIMEOUT_S)
        return str(reply.json()["data"][0]["id"])
    except (WireError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise LaunchError(f"the cold-started fake names no model on /v1/models: {exc}") from exc


def _read_ready_line(process: Process, timeout_s: float, log_path: str) -> str:
    """The first stdout line, within the deadline; the process is killed on failure."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or process.poll() is not None:
                break
            if selector.select(timeout=min(remaining, 0.5)):
                chunk = os.read(process.stdout.fileno(), 65536)
                if not chunk:
                    break
                buffer += chunk
    if b"\n" in buffer:
        return buffer.split(b"\n", 1)[0].decode("utf-8", errors="replace")
    if process.poll() is None:
        process.kill()
        process.wait(timeout=5)
    with open(log_path, "rb") as log:
        stderr = log.read()[-2000:]
    raise LaunchError(
        f"{process.args!s} gave no ready line within {timeout_s:g} s "
        f"(exit code {process.returncode}); stderr tail: {stderr.decode(errors='replace')}"
    )
