"""The real Dynamo in the loop: frontend (+ RL listener), a loopback ZMQ broker and one engine,
started from a virtual environment that holds `ai-dynamo` (see `rl-conformance install-dynamo`).

Engines:
- `mocker`: Dynamo's own `python -m dynamo.mocker` (simulated vLLM scheduling; random token ids,
  no logprobs, no RL routes).
- `fake-vllm`: our toy model served as a real Dynamo backend worker through Dynamo's Python
  runtime (`python -m fake_backends.dynamo.worker`), with vLLM-style RL routes registered by
  `dynamo.common.rl`, so the real frontend, nvext assembly and RL listener are under test.
- `fake-sglang`: the same toy worker with SGLang's `/engine` routes registered the way Dynamo's
  SGLang worker registers them (no RL registration; the worker leaves discovery while paused or
  released), reached by its system URL as an SGLang worker is.
- `vllm` and `vllm-tied`: the real vLLM engine (CPU build, `rl-conformance install-vllm`) as
  `python -m dynamo.vllm --enable-rl`, started as the spec starts it, on a tiny random-weight
  Qwen2-style model made locally with two further checkpoints of the same architecture for its
  updates (`engine_side/make_checkpoints.py`): `vllm` stores a separate output head, `vllm-tied`
  ties it to the input embedding (as Qwen3-0.6B, Qwen2.5-0.5B and Llama-3.2-1B ship).
- `sglang`: the real SGLang engine on CPU (`rl-conformance install-sglang`) as
  `python -m dynamo.sglang --enable-rl --device cpu` on the same untied checkpoints, reached by
  its system URL as every SGLang worker is (`real_engines`).
- `vllm-bf16` and `sglang-bf16`: the same, with the checkpoints stored and served in bfloat16,
  as GPU fleets serve them (the others store and serve float32).

Every listener binds 127.0.0.1. The event plane runs in broker mode because 1.6.1's direct mode
binds the workers' ZMQ publishers on all interfaces.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import httpx

import fake_backends

from ..errors import ConfigurationError, LaunchError
from ..model.releases import LAUNCHER_SOURCE, MAIN, UNKNOWN_SOURCE
from ..model.target import LISTENER_RESTART, WORKER_DEPARTURE, WORKER_KILL, Target
from .dynamo_disruptions import READY_TIMEOUT_S, Disruptions
from .dynamo_python import (
    DEFAULT_VENV,
    PYTHON_ENV,
    SGLANG_PYTHON_ENV,
    SGLANG_VENV,
    VLLM_PYTHON_ENV,
    VLLM_VENV,
    dynamo_version,
    find_dynamo_python,
    installed_version,
)
from .model_dir import eos_token_ids
from .processes import ManagedProcess
from .readiness import wait_until_ready
from .real_engines import MODEL_NAME as REAL_MODEL_NAME
from .real_engines import REAL_ENGINES, checkpoints
from .tracing import REQUEST_TRACE_FILE, request_trace_environment

ENGINES = ("mocker", "fake-vllm", "fake-sglang", *REAL_ENGINES)
TOY_ENGINES = {"fake-vllm": "vllm", "fake-sglang": "sglang"}
"""Our toy worker behind real Dynamo, and the administration family it serves."""
MODEL_NAME = "toy"
PORT_RACE_ATTEMPTS = 3
"""Launches retried when a port found free was taken before a process bound it."""
# Dynamo 1.6.1 parses DYN_SYSTEM_PORT as an i16: any port above 32767 (so every ephemeral port
# Linux hands out) makes the worker exit at start-up with `invalid value unsigned int ...,
# expected i16 for key "SYSTEM_PORT"`.
SYSTEM_PORTS = range(20000, 32768)

DEPLOYMENT_PRIORITY = -5
"""The deployment's processes run ahead of the harness's own work, where the user may ask for it:
a Dynamo worker renews its file-discovery registration from a thread, and on a machine whose other
cores are busy (two test workers beside vLLM, which pins its OpenMP threads to one core) that
thread starved for longer than the registration's lifetime once, and the worker left discovery.
Verdicts never depend on the engine's pace; this only keeps the deployment alive."""

_BROKER = """
import sys, zmq
context = zmq.Context()
xsub = context.socket(zmq.XSUB); xsub.bind(sys.argv[1])
xpub = context.socket(zmq.XPUB); xpub.bind(sys.argv[2])
zmq.proxy(xsub, xpub)
"""


@dataclass
class DynamoLauncher(Disruptions):
    kind: ClassVar[str] = "dynamo"
    starts_cheaply: ClassVar[bool] = False
    engine: str
    python: Path | None = None
    engine_faults: tuple[str, ...] = ()
    workers: int = 1
    target_id: str = ""
    backend: str = "vllm"
    keep_logs_in: Path | None = None
    processes: list[ManagedProcess] = field(default_factory=list)
    workdir: Path | None = None
    _frontend: ManagedProcess | None = None
    _urls: tuple[str, str] = ("", "")
    worker_urls: tuple[str, ...] = ()
    offers: frozenset[str] = frozenset({LISTENER_RESTART})
    migration_limit: int = 0
    """The frontend's `--migration-limit` (Dynamo's default 0: a request whose worker died
    is not moved)."""
    update_paths: tuple[str, ...] = ()
    served_path: str | None = None
    """The checkpoint a real engine was started on (what its operator knows and its discovery,
    naming the served model, does not say)."""

    @property
    def model_name(self) -> str:
        return REAL_MODEL_NAME if self.engine in REAL_ENGINES else MODEL_NAME

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ConfigurationError(
                f"--launch: expected one of dynamo-{', dynamo-'.join(ENGINES)}"
                f", observed dynamo-{self.engine}"
            )
        if self.engine not in TOY_ENGINES and self.engine_faults:
            raise ConfigurationError(
                "--engine-fault needs --launch dynamo-fake-vllm or dynamo-fake-sglang "
                f"(dynamo-{self.engine} cannot be told to break the contract)"
            )
        self.target_id = self.target_id or f"dynamo-{self.engine}"
        real = REAL_ENGINES.get(self.engine)
        if TOY_ENGINES.get(self.engine) == "sglang" or (real and real.family == "sglang"):
            self.backend = "sglang"
        if self.engine in TOY_ENGINES:
            # Our toy worker restarts in seconds; a real vLLM worker takes a minute or more.
            self.offers = self.offers | {WORKER_DEPARTURE, WORKER_KILL}

    def start(self) -> Target:
        real = REAL_ENGINES.get(self.engine)
        vllm, sglang = (real is not None and real.family == name for name in ("vllm", "sglang"))
        python = self.python or find_dynamo_python(vllm=vllm, sglang=sglang)
        if python is None:
            if real is not None:
                venv, variable = (
                    (VLLM_VENV, VLLM_PYTHON_ENV) if vllm else (SGLANG_VENV, SGLANG_PYTHON_ENV)
                )
                raise LaunchError(
                    f"no Python with ai-dynamo and {real.family} found: run `rl-conformance "
                    f"install-{real.family}` (creates ./{venv}) or set {variable}"
                )
            raise LaunchError(
                "no Python with ai-dynamo found: run `rl-conformance install-dynamo` "
                f"(creates ./{DEFAULT_VENV}) or set {PYTHON_ENV}"
            )
        started = time.monotonic()
        version = dynamo_version(python)
        for attempt in range(1, PORT_RACE_ATTEMPTS + 1):
            self.workdir = Path(tempfile.mkdtemp(prefix=f"rl-conformance-{self.target_id}-"))
            try:
                target = self._start(python, version)
            except LaunchError as exc:
                self.stop()
                # A port found free was taken before the process bound it (other launches
                # run alongside): new ports, a bounded number of times.
                if "already in use" not in str(exc) or attempt == PORT_RACE_ATTEMPTS:
                    raise
                continue
            except BaseException:
                self.stop()
                raise
            target.notes.append(f"launch to ready: {time.monotonic() - started:.1f} s")
            if attempt > 1:
                target.notes.append(f"launched at attempt {attempt} (a port was taken meanwhile)")
            return target
        raise AssertionError("unreachable")

    def _start(self, python: Path, version: str) -> Target:
        assert self.workdir is not None
        model_dir = self.workdir / "model"
        _build_model_dir(model_dir)
        real = REAL_ENGINES.get(self.engine)
        if real is not None:
            made = checkpoints(python, model_dir, real.layout, real.dtype)
            model_dir = made[0]
            self.served_path = str(model_dir)
            self.update_paths = tuple(str(path) for path in made[1:])
        # Below the ephemeral range, as the system ports: the frontend's ports are bound again
        # when the listener is re-scoped, and an ephemeral port freed by the old frontend may be
        # taken by any outgoing connection meanwhile (seen with two test workers).
        ports = {name: _system_port() for name in ("http", "rl", "xsub", "xpub")}
        env = self._environment(ports)
        broker = self._process(
            "broker",
            [
                str(python),
                "-c",
                _BROKER,
                f"tcp://127.0.0.1:{ports['xsub']}",
                f"tcp://127.0.0.1:{ports['xpub']}",
            ],
            env,
        )
        frontend_env = dict(
            env,
            DYN_ENABLE_RL="true",
            DYN_RL_PORT=str(ports["rl"]),
            DYN_SGLANG_ENABLE_GENERATE="1",
            DYN_VLLM_ENABLE_INFERENCE_V1_GENERATE="1",
            **request_trace_environment(self.workdir / REQUEST_TRACE_FILE),
        )
        frontend = self._process(
            "frontend",
            [
                str(python),
                "-m",
                "dynamo.frontend",
                "--http-host",
                "127.0.0.1",
                "--http-port",
                str(ports["http"]),
                "--discovery-backend",
                "file",
                "--request-plane",
                "tcp",
                "--event-plane",
                "zmq",
                *(["--migration-limit", str(self.migration_limit)] if self.migration_limit else []),
            ],
            frontend_env,
        )
        engines = self._engines(python, model_dir, env)
        for process in [broker, frontend, *engines]:
            process.start()
        frontend_url = f"http://127.0.0.1:{ports['http']}"
        rl_url = f"http://127.0.0.1:{ports['rl']}"
        self._wait_ready(frontend_url, rl_url)
        self._frontend = frontend
        self._urls = (frontend_url, rl_url)
        versions = {"ai-dynamo": version, "engine": self.engine}
        if real is not None:
            versions[real.family] = installed_version(python, real.distribution)
            versions["torch"] = installed_version(python, "torch")
            versions["device"] = "cpu"
        return Target(
            id=self.target_id,
            backend=self.backend,
            kind=self.kind,
            frontend_url=frontend_url,
            rl_url=rl_url,
            model=self.model_name,
            worker_urls=self.worker_urls,
            probe=self,
            update_model_paths=self.update_paths,
            request_trace=str(self.workdir / REQUEST_TRACE_FILE),
            eos_token_ids=eos_token_ids(model_dir),
            migration_limit=self.migration_limit,
            versions=versions,
            release=version or MAIN,
            release_source=LAUNCHER_SOURCE if version else UNKNOWN_SOURCE,
            notes=[process.describe() for process in self.processes]
            + [f"logs: {self.keep_logs_in / self.target_id if self.keep_logs_in else self.workdir}"]
            + [f"work directory: {self.workdir}"]
            + ([f"engine faults: {', '.join(self.engine_faults)}"] if self.engine_faults else []),
        )

    def _environment(self, ports: dict[str, int]) -> dict[str, str]:
        assert self.workdir is not None
        home = self.workdir / "home"
        home.mkdir()
        (self.workdir / "kv").mkdir()
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("DYN_", "VIRTUAL_ENV", "PYTHONHOME"))
        }
        env.update(
            {
                "HOME": str(home),
                "DYN_FILE_KV": str(self.workdir / "kv"),
                "DYN_DISCOVERY_BACKEND": "file",
                "DYN_REQUEST_PLANE": "tcp",
                "DYN_EVENT_PLANE": "zmq",
                "DYN_TCP_RPC_HOST": "127.0.0.1",
                "DYN_TCP_RESPONSE_STREAM_HOST": "127.0.0.1",
                "DYN_EVENT_PLANE_HOST": "127.0.0.1",
                "DYN_SYSTEM_HOST": "127.0.0.1",
                "DYN_ZMQ_BROKER_URL": f"xsub=tcp://127.0.0.1:{ports['xsub']},"
                f"xpub=tcp://127.0.0.1:{ports['xpub']}",
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "PYTHONUNBUFFERED": "1",
            }
        )
        return env

    def _engines(self, python: Path, model_dir: Path, env: dict[str, str]) -> list[ManagedProcess]:
        if self.engine == "mocker":
            # The mocker registers no RL endpoint: its system server (health, metrics) is known
            # to the suite the way a user knows it, as a --worker-url.
            port = _system_port()
            self.worker_urls = (f"http://127.0.0.1:{port}",)
            return [
                self._process(
                    "mocker",
                    [
                        str(python),
                        "-m",
                        "dynamo.mocker",
                        "--model-path",
                        str(model_dir),
                        "--model-name",
                        MODEL_NAME,
                        "--speedup-ratio",
                        "100",
                        "--sglang-generate",
                        "--discovery-backend",
                        "file",
                        "--request-plane",
                        "tcp",
                        "--event-plane",
                        "zmq",
                    ],
                    dict(env, DYN_SYSTEM_PORT=str(port)),
                )
            ]
        real = REAL_ENGINES.get(self.engine)
        if real is not None:
            ports = [_system_port() for _ in range(self.workers)]
            if real.family == "sglang":
                # SGLang workers are not discovered: the suite knows them by URL.
                self.worker_urls = tuple(f"http://127.0.0.1:{port}" for port in ports)
            return [
                self._process(
                    f"{real.family}-{index}",
                    real.command(python, model_dir),
                    dict(env, **dict(real.environment), DYN_SYSTEM_PORT=str(port)),
                )
                for index, port in enumerate(ports)
            ]
        source_root = str(Path(fake_backends.__file__).resolve().parents[1])
        family = TOY_ENGINES[self.engine]
        engines = []
        system_urls = []
        for index in range(self.workers):
            command = [
                str(python),
                "-m",
                "fake_backends.dynamo.worker",
                "--model-dir",
                str(model_dir),
                "--model-name",
                MODEL_NAME,
                "--admin-family",
                family,
            ]
            for fault in self.engine_faults:
                command += ["--engine-fault", fault]
            port = _system_port()
            system_urls.append(f"http://127.0.0.1:{port}")
            worker_env = dict(
                env,
                PYTHONPATH=source_root,
                DYN_SYSTEM_PORT=str(port),
                DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS='["generate"]',
            )
            engines.append(self._process(f"worker-{index}", command, worker_env))
        if family == "sglang":
            # SGLang workers are not discovered: the suite knows them as a user does, by URL.
            self.worker_urls = tuple(system_urls)
        return engines

    def _process(self, name: str, command: list[str], env: dict[str, str]) -> ManagedProcess:
        assert self.workdir is not None
        process = ManagedProcess(
            name,
            command,
            env,
            self.workdir / f"{name}.log",
            cwd=self.workdir,
            priority=DEPLOYMENT_PRIORITY,
        )
        self.processes.append(process)
        return process

    def _wait_ready(self, frontend_url: str, rl_url: str) -> None:
        real = REAL_ENGINES.get(self.engine)
        needs_rl = self.backend != "sglang" and self.engine != "mocker"

        def ready(http: httpx.Client) -> tuple[bool, str]:
            models = http.get(frontend_url + "/v1/models").json().get("data", [])
            listed = [entry.get("id") for entry in models]
            if self.model_name not in listed:
                return False, f"/v1/models lists {listed}"
            if not needs_rl:
                return True, "ready"
            workers = http.get(rl_url + "/v1/rl/workers").json().get("workers", [])
            usable = [w for w in workers if w.get("routes") and "error" not in w]
            return len(usable) >= self.workers, f"/v1/rl/workers lists {len(usable)} usable"

        wait_until_ready(
            self.target_id,
            ready,
            deadline_s=real.ready_timeout_s if real else READY_TIMEOUT_S,
            alive=lambda: self._alive(self.processes),
            details=lambda: "\n".join(f"--- {p.name}\n{p.log_tail(1500)}" for p in self.processes),
        )

    def prepare(self, stack: contextlib.ExitStack) -> None:
        return None

    def stop(self) -> None:
        for process in reversed(self.processes):
            try:
                process.stop()
            except OSError:
                continue
        if self.workdir is not None:
            if self.keep_logs_in is not None:
                destination = self.keep_logs_in / self.target_id
                destination.mkdir(parents=True, exist_ok=True)
                for log in self.workdir.glob("*.log"):
                    shutil.copy(log, destination / log.name)
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        self.processes = []


def _system_port() -> int:
    """A free loopback port below the ephemeral range: one DYN_SYSTEM_PORT can hold, and one no
    outgoing connection takes while its listener restarts (see SYSTEM_PORTS)."""
    for _ in range(200):
        port = random.choice(SYSTEM_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise LaunchError(f"no free port below {SYSTEM_PORTS.stop} for DYN_SYSTEM_PORT")


def _build_model_dir(directory: Path) -> None:
    """The model directory both engines load: tokenizer, config and chat template of the toy
    vocabulary, written by fake_backends so the real frontend decodes ids as the toy does."""
    done = subprocess.run(
        [sys.executable, "-m", "fake_backends.model.directory", str(directory)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        raise LaunchError(f"could not write the model directory: {done.stderr[-2000:]}")
    if not (directory / "tokenizer.json").exists():
        raise LaunchError(f"model directory {directory} has no tokenizer.json")
    json.loads((directory / "config.json").read_text())
