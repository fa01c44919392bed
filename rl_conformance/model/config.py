"""One run's configuration: one table of options, one validated `RunConfig`.

The same table feeds the `rl-conformance run` command line and the pytest plugin's options
(`--rl-*`), so a flag is declared, defaulted and documented once; every rule that ties flags
together (a worker selection needs `--allow-mutations`, `--frontend` needs `--backend`, ...) is
checked once, in `RunConfig.validate`, whichever way the run was started.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigurationError
from .record_meta import load_record_meta
from .releases import RELEASES
from .weight_transfer import WeightTransfer, load_weight_transfer

BACKENDS = ("vllm", "sglang", "trtllm")
FAKES = ("vllm", "sglang", "trtllm", "vllm-sidecar")
"""Our fake deployments: one per backend, and vLLM with the native sidecar's routes."""
TOY_LAUNCHES = ("dynamo-fake-vllm", "dynamo-fake-sglang")
LAUNCH_KINDS = ("dynamo-mocker", *TOY_LAUNCHES, "dynamo-vllm", "dynamo-vllm-tied", "docker")


@dataclass(frozen=True)
class Option:
    """One option: its `RunConfig` field, its command-line flag, how it parses."""

    name: str
    flag: str
    help: str
    kind: str = "str"  # str | int | float | flag | list | int-list
    default: Any = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    pytest_flag: str = ""
    path: bool = False
    """A path (or paths) on this machine: resolved against the working directory when parsed, so
    that it means the same wherever the run later starts a process (`resolve_path`)."""

    @property
    def pytest(self) -> str:
        """The pytest option: `--rl-<flag>` unless the flag already is one."""
        if self.pytest_flag:
            return self.pytest_flag
        bare = self.flag.removeprefix("--")
        return self.flag if bare.startswith("rl-") else f"--rl-{bare}"

    def declare(self, add: Any, flag: str, dest: str) -> None:
        """Declare this option with an argparse-compatible `add` (argparse or pytest)."""
        kwargs: dict[str, Any] = {"dest": dest, "help": self.help}
        if self.kind == "flag":
            kwargs.update(action="store_true", default=False)
        elif self.kind in ("list", "int-list"):
            kwargs.update(action="append", default=[], metavar=self.metavar)
            if self.kind == "int-list":
                kwargs["type"] = int
        else:
            kwargs.update(default=self.default, metavar=self.metavar)
            if self.kind in ("int", "float"):
                kwargs["type"] = int if self.kind == "int" else float
        if self.choices is not None:
            kwargs["choices"] = self.choices
        add(flag, **kwargs)


OPTIONS: tuple[Option, ...] = (
    Option("frontend", "--frontend", "frontend URL of an external deployment", metavar="URL"),
    Option("rl_url", "--rl-url", "RL discovery listener URL", metavar="URL"),
    Option("backend", "--backend", "backend of the external deployment", choices=BACKENDS),
    Option("model", "--model", "model to request (default: the one /v1/models lists)"),
    Option(
        "dynamo_release",
        "--dynamo-release",
        "the Dynamo release the external deployment runs, as declared (a release the frontend "
        "publishes wins); capabilities are judged against what that release has (without "
        "either, the release is reported unknown and judged as main, what the spec documents)",
        choices=RELEASES,
    ),
    Option(
        "worker_url",
        "--worker-url",
        "system URL of a worker that discovery does not list (SGLang, TensorRT-LLM; "
        "repeatable): its administration and its metrics",
        kind="list",
        metavar="URL",
    ),
    Option(
        "request_trace",
        "--request-trace",
        "the external frontend's request trace (DYN_REQUEST_TRACE file sink: a .jsonl file, a "
        "directory of segments, or a jsonl_gz segment prefix), recording request_payload rows "
        "with the X-RL-* headers captured; for telemetry.trace_correlation",
        metavar="FILE",
        path=True,
    ),
    Option(
        "eos_token_id",
        "--eos-token-id",
        "the external model's end-of-sequence token id (its generation_config.json "
        "eos_token_id; repeatable): a stop no stop condition of the request explains must end "
        "on one (stream.terminal_reason_verified)",
        kind="int-list",
        metavar="ID",
    ),
    Option(
        "record_meta",
        "--record-meta",
        "what only you know of the run, for its dynamo.rl.validation.v1 records (framework "
        "commits, image and digest, CUDA and driver, model revisions, hardware, topology, "
        "owners): a JSON object shaped like the record (docs/EVIDENCE.md)",
        metavar="FILE",
        path=True,
    ),
    Option(
        "fake",
        "--fake",
        "test one of our fake deployments (repeatable; default: all four when no "
        "--frontend or --launch is given)",
        kind="list",
        metavar="NAME",
    ),
    Option(
        "fault",
        "--fault",
        "start the fakes with this named fault (repeatable)",
        kind="list",
        metavar="NAME",
    ),
    Option("workers", "--workers", "RL workers per fake deployment", kind="int", default=2),
    Option(
        "capability",
        "--capability",
        "run only this capability (repeatable)",
        kind="list",
        metavar="ID",
    ),
    Option(
        "launch",
        "--launch",
        "start a deployment: the real Dynamo with its mocker or with our fake engine "
        "(needs `rl-conformance install-dynamo`), or containers",
        choices=LAUNCH_KINDS,
    ),
    Option(
        "docker_config",
        "--docker-config",
        "deployment config for --launch docker",
        metavar="FILE",
        path=True,
    ),
    Option(
        "engine_fault",
        "--engine-fault",
        "engine fault for --launch dynamo-fake-vllm or dynamo-fake-sglang (repeatable)",
        kind="list",
        metavar="NAME",
    ),
    Option(
        "dynamo_python",
        "--dynamo-python",
        "python of a virtual environment with ai-dynamo",
        metavar="PATH",
        path=True,
    ),
    Option(
        "allow_mutations",
        "--allow-mutations",
        "allow mutating admin calls on the chosen workers (never by default, except on our "
        "own fakes)",
        kind="flag",
    ),
    Option(
        "worker",
        "--worker",
        "a worker mutating calls may target (repeatable)",
        kind="int-list",
        metavar="INSTANCE_ID",
    ),
    Option(
        "all_workers",
        "--all-workers",
        "mutating calls may target every advertised worker",
        kind="flag",
    ),
    Option(
        "read_only",
        "--read-only",
        "send no mutating call at all, not even to our fakes",
        kind="flag",
    ),
    Option(
        "update_model_path",
        "--update-model-path",
        "checkpoint for weight-update tests on a real engine (give two; they alternate; a "
        "relative path is resolved against the current directory)",
        kind="list",
        metavar="PATH",
        path=True,
    ),
    Option(
        "reference_checkpoint",
        "--reference-checkpoint",
        "a local, readable copy of each --update-model-path checkpoint (same order), for "
        "refresh.served_policy_verified when the deployment's paths are not readable here",
        kind="list",
        metavar="PATH",
        path=True,
    ),
    Option(
        "reference_python",
        "--reference-python",
        "a Python with torch and transformers that computes the served-policy reference from "
        "a checkpoint (default: $RL_CONFORMANCE_REFERENCE_PYTHON, else .venv-vllm's)",
        metavar="PATH",
        path=True,
    ),
    Option(
        "weight_transfer",
        "--weight-transfer",
        "a weight transfer for native-sidecar workers, as a JSON file "
        '{"init_info": {...}, "update_info": [{...}]} (give two; they alternate)',
        kind="list",
        metavar="FILE",
        path=True,
    ),
    Option(
        "record",
        "--record",
        "record a fact the deployment does not publish (e.g. vllm=0.11.0, gpu=H100; "
        "repeatable): written in matrix.json `recorded`, marked as given by the user, never "
        "as observed",
        kind="list",
        metavar="KEY=VALUE",
    ),
    Option(
        "report_dir",
        "--report-dir",
        "where matrix.json, matrix.md, junit.xml and matrix.html go",
        default="conformance-report",
        metavar="DIR",
        path=True,
    ),
    Option("seed", "--seed", "seed for generated requests", kind="int", default=0),
    Option(
        "examples",
        "--examples",
        "hypothesis examples per property test (default 8)",
        kind="int",
        default=8,
    ),
    Option(
        "deadline",
        "--deadline",
        "per-request deadline in seconds (default 30)",
        kind="float",
        default=30.0,
    ),
    Option(
        "budget_generations",
        "--budget-generations",
        "send at most N generation requests to each target; the tests run are chosen from "
        "estimates per test, one test per capability first (the cheapest, MUST first), property "
        "tests with fewer examples rather than none, and the matrix names what the budget left "
        "uncovered (default: no limit)",
        kind="int",
        metavar="N",
    ),
    Option(
        "dry_run",
        "--dry-run",
        "start nothing and send nothing: list the tests a run would run on each target with "
        "their estimated generation requests (and, with --budget-generations, which ones the "
        "budget covers) and the budget that covers every capability once; also written as "
        "plan.json in --report-dir",
        kind="flag",
    ),
    Option(
        "run_timeout",
        "--run-timeout",
        "stop the whole run after this many seconds; the matrix is still written, marked "
        "incomplete (default: no limit)",
        kind="float",
        metavar="SECONDS",
    ),
    Option(
        "verify_reproducers",
        "--verify-reproducers",
        "right after a test fails, re-send its curl reproducer (read-only requests only) and "
        "record whether it shows the same response (`reproduced` in the evidence); the kill "
        "matrix always does",
        kind="flag",
    ),
    Option(
        "shrink",
        "--shrink",
        "minimise each failing generated example (many more requests; off by default: every "
        "failure already carries the exchange that failed and its curl reproducer)",
        kind="flag",
    ),
)


@dataclass(frozen=True)
class RunConfig:
    """Everything one run needs to know; build it with `from_options`, check it with
    `validate`. `fault_matrix` is the kill-matrix mode (one fake per named fault)."""

    frontend: str | None = None
    rl_url: str | None = None
    backend: str | None = None
    model: str | None = None
    dynamo_release: str | None = None
    worker_url: tuple[str, ...] = ()
    request_trace: str | None = None
    eos_token_id: tuple[int, ...] = ()
    record_meta: str | None = None
    fake: tuple[str, ...] = ()
    fault: tuple[str, ...] = ()
    workers: int = 2
    capability: tuple[str, ...] = ()
    launch: str | None = None
    docker_config: str | None = None
    engine_fault: tuple[str, ...] = ()
    dynamo_python: str | None = None
    allow_mutations: bool = False
    worker: tuple[int, ...] = ()
    all_workers: bool = False
    read_only: bool = False
    update_model_path: tuple[str, ...] = ()
    reference_checkpoint: tuple[str, ...] = ()
    reference_python: str | None = None
    weight_transfer: tuple[str, ...] = ()
    record: tuple[str, ...] = ()
    report_dir: str = "conformance-report"
    seed: int = 0
    examples: int = 8
    deadline: float = 30.0
    budget_generations: int | None = None
    dry_run: bool = False
    run_timeout: float | None = None
    verify_reproducers: bool = False
    shrink: bool = False
    fault_matrix: bool = False
    fault_shard: tuple[int, int] | None = None
    """Kill-matrix mode only: (index, count) runs every count-th fault from index (one shard of
    `kill-matrix --jobs`)."""

    @classmethod
    def from_options(cls, namespace: Any, prefix: str = "") -> RunConfig:
        """From an argparse namespace (prefix "") or pytest's options (prefix "rl_"). Paths are
        resolved against the working directory now (`Option.path`)."""
        values: dict[str, Any] = {}
        for option in OPTIONS:
            value = getattr(namespace, prefix + option.name, option.default)
            if option.kind in ("list", "int-list"):
                value = tuple(value or ())
            if option.path:
                value = (
                    tuple(map(resolve_path, value))
                    if isinstance(value, tuple)
                    else resolve_path(value)
                )
            values[option.name] = value
        return cls(**values)

    @property
    def report_path(self) -> Path:
        return Path(self.report_dir)

    def with_(self, **changes: Any) -> RunConfig:
        return replace(self, **changes)

    def validate(self) -> RunConfig:
        """Raise `ConfigurationError` naming the flags; return self when consistent."""
        for flag, values, allowed in (
            ("--backend", [self.backend] if self.backend else [], BACKENDS),
            ("--fake", list(self.fake), FAKES),
            ("--launch", [self.launch] if self.launch else [], LAUNCH_KINDS),
        ):
            for value in values:
                if value not in allowed:
                    raise ConfigurationError(
                        f"{flag}: expected one of {', '.join(allowed)}, observed {value!r}"
                    )
        external = (
            self.rl_url
            or self.backend
            or self.model
            or self.worker_url
            or self.dynamo_release
            or self.request_trace
            or self.eos_token_id
        )
        for token in self.eos_token_id:
            if token < 0:
                raise ConfigurationError(
                    f"--eos-token-id: expected a token id >= 0, observed {token}"
                )
        if self.frontend and not self.backend:
            raise ConfigurationError("--frontend needs --backend {vllm|sglang|trtllm}")
        if external and not self.frontend:
            raise ConfigurationError(
                "--rl-url, --backend, --model, --worker-url, --dynamo-release, "
                "--request-trace and --eos-token-id describe an external deployment: give "
                "--frontend URL too"
            )
        if self.frontend and self.rl_url and same_url(self.frontend, self.rl_url):
            raise ConfigurationError(
                f"--rl-url {self.rl_url} is the --frontend URL: Dynamo serves discovery on its "
                "own RL listener (port 8001 by default; the frontend's is 8000): give the RL "
                "listener's URL, or leave --rl-url out (the rows that need it are then skipped)"
            )
        if self.fault and (self.frontend or self.launch) and not self.fake:
            raise ConfigurationError(
                "--fault breaks one of our fakes, and this run tests none: add --fake NAME "
                "(--fault does not change a deployment given by --frontend or --launch)"
            )
        if len(self.reference_checkpoint) > len(self.update_model_path):
            raise ConfigurationError(
                "--reference-checkpoint: expected at most one per --update-model-path "
                f"({len(self.update_model_path)} given), observed {len(self.reference_checkpoint)}"
            )
        if self.engine_fault and self.launch not in TOY_LAUNCHES:
            raise ConfigurationError(f"--engine-fault needs --launch {' or '.join(TOY_LAUNCHES)}")
        if self.docker_config and self.launch != "docker":
            raise ConfigurationError("--docker-config needs --launch docker")
        if self.launch == "docker" and not self.docker_config:
            raise ConfigurationError("--launch docker needs --docker-config FILE")
        if self.worker and self.all_workers:
            raise ConfigurationError("--worker and --all-workers exclude each other")
        if (self.worker or self.all_workers) and not self.allow_mutations:
            raise ConfigurationError(
                "--worker/--all-workers choose targets for mutating calls: add --allow-mutations"
            )
        if self.allow_mutations and not (self.worker or self.all_workers):
            raise ConfigurationError(
                "--allow-mutations needs --worker INSTANCE_ID (repeatable) or --all-workers"
            )
        if self.allow_mutations and self.read_only:
            raise ConfigurationError("--allow-mutations and --read-only exclude each other")
        for name, value, low in (
            ("--examples", self.examples, 1),
            ("--workers", self.workers, 0),
            ("--budget-generations", self.budget_generations, 1),
        ):
            if value is None:
                continue
            if value < low:
                raise ConfigurationError(f"{name}: expected an integer >= {low}, observed {value}")
        for name, number in (("--deadline", self.deadline), ("--run-timeout", self.run_timeout)):
            if number is not None and number <= 0:
                raise ConfigurationError(
                    f"{name}: expected a positive number of seconds, observed {number:g}"
                )
        for flag, path, what in (
            ("--dynamo-python", self.dynamo_python, "`rl-conformance install-dynamo` prints one"),
            (
                "--reference-python",
                self.reference_python,
                "a Python with torch and transformers; `rl-conformance install-vllm` prints one",
            ),
            ("--docker-config", self.docker_config, "a deployment config, see deploy/docker"),
            *(
                ("--reference-checkpoint", local, "a readable copy of the checkpoint, here")
                for local in self.reference_checkpoint
            ),
        ):
            if path and not os.path.exists(path):
                raise ConfigurationError(f"{flag} {path}: no such file or directory ({what})")
        self.weight_transfers()
        self.record_meta_document()
        for flag, given, metavar in (
            ("--update-model-path", self.update_model_path, "PATH"),
            ("--weight-transfer", self.weight_transfer, "FILE"),
        ):
            if len(given) == 1:
                raise ConfigurationError(
                    f"{flag}: expected two (consecutive updates alternate between them, so that "
                    f"every update changes the weights served), observed one ({given[0]}): give "
                    f"a second {flag} {metavar}"
                )
        self.recorded()
        return self

    def pytest_arguments(self) -> list[str]:
        """The `--rl-*` options that rebuild this configuration in another pytest process (a
        parallel run's workers): every option that differs from its default."""
        arguments: list[str] = []
        for option in OPTIONS:
            value = getattr(self, option.name)
            if option.kind == "flag":
                arguments += [option.pytest] if value else []
            elif option.kind in ("list", "int-list"):
                for item in value:
                    arguments += [option.pytest, str(item)]
            elif value is not None and value != option.default:
                if option.path and value == resolve_path(option.default):
                    continue  # the default, resolved when parsed
                arguments += [option.pytest, str(value)]
        return arguments

    def recorded(self) -> dict[str, str]:
        """The `--record KEY=VALUE` facts, in the order given (ConfigurationError naming the
        flag and the value it could not read)."""
        return parse_records(self.record)

    def record_meta_document(self) -> dict[str, Any] | None:
        """`--record-meta`, read and checked field by field (None without the flag)."""
        if self.record_meta is None:
            return None
        return load_record_meta(Path(self.record_meta))

    def weight_transfers(self) -> tuple[WeightTransfer, ...]:
        """The `--weight-transfer` files, parsed (ConfigurationError naming the file and field)."""
        return tuple(load_weight_transfer(path) for path in self.weight_transfer)


def resolve_path(value: str | None) -> str | None:
    """A path flag's value as an absolute path on this machine (`~` expanded, symbolic links
    kept: a virtual environment's python is one); a URL (`scheme://...`) is kept as given."""
    if not value or "://" in value:
        return value
    return os.path.abspath(os.path.expanduser(value))


def same_url(first: str, second: str) -> bool:
    """Whether two URLs name the same server and path (scheme and host case, a default port and a
    trailing slash aside)."""

    def key(url: str) -> tuple[str, str, int | None, str]:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        try:
            port = parts.port or {"http": 80, "https": 443}.get(scheme)
        except ValueError:
            port = None
        return scheme, (parts.hostname or "").lower(), port, parts.path.rstrip("/")

    return key(first) == key(second)


RECORD_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]*")
RECORD_VALUE_CHARS = 200


def parse_records(items: tuple[str, ...] | list[str]) -> dict[str, str]:
    """`--record KEY=VALUE` items as a mapping: KEY is a name (letters, digits and `._:/@+-`,
    e.g. `vllm` or `gpu.model`), VALUE one non-empty line of at most `RECORD_VALUE_CHARS`
    characters; a KEY given twice must have the same VALUE."""
    recorded: dict[str, str] = {}
    for item in items:
        key, equals, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not equals:
            raise ConfigurationError(f"--record: expected KEY=VALUE, observed {item!r} (no '=')")
        if not key:
            raise ConfigurationError(
                f"--record: expected a KEY before '=', observed {item!r} (empty key)"
            )
        if not RECORD_KEY.fullmatch(key):
            raise ConfigurationError(
                f"--record: expected a KEY of letters, digits and ._:/@+- starting with a letter "
                f"or digit, observed {key!r} in {item!r}"
            )
        if not value:
            raise ConfigurationError(
                f"--record: expected a VALUE after '=', observed {item!r} (empty value)"
            )
        if len(value) > RECORD_VALUE_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise ConfigurationError(
                f"--record: expected a VALUE of one line of at most {RECORD_VALUE_CHARS} "
                f"characters, observed {value[:80]!r} for {key!r}"
            )
        if recorded.get(key, value) != value:
            raise ConfigurationError(
                f"--record: {key!r} given twice with different values, observed "
                f"{recorded[key]!r} and {value!r}"
            )
        recorded[key] = value
    return recorded


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for option in OPTIONS:
        option.declare(parser.add_argument, option.flag, option.name)


def add_pytest_options(group: Any) -> None:
    for option in OPTIONS:
        option.declare(group.addoption, option.pytest, "rl_" + option.name)
