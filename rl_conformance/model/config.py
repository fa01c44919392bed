"""One run's configuration, validated: `RunConfig`, built from the option table (`options.py`).

The same table feeds the `rl-conformance run` command line and the pytest plugin's options
(`--rl-*`), so a flag is declared, defaulted and documented once; every rule that ties flags
together (a worker selection needs `--allow-mutations`, `--frontend` needs `--backend`, ...) is
checked once, in `RunConfig.validate`, whichever way the run was started. The rules of one
deployment given by URL are `Deployment.check` (`deployment.py`), which holds the flags and each
table of a `--targets` file alike.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from .capabilities import unknown_ids_message
from .credentials import Credentials
from .deployment import DEPLOYMENT_FIELDS, DESCRIBING, FILE_KEYS, Deployment
from .deployment import same_url as same_url
from .options import BY_NAME, CREDENTIAL_OPTIONS, FAKES, LAUNCH_KINDS, OPTIONS, TOY_LAUNCHES
from .record_meta import load_record_meta
from .targets_file import load_targets
from .weight_transfer import WeightTransfer

DESCRIBES = (*DESCRIBING, *(option.name for option in CREDENTIAL_OPTIONS))
"""The flags that describe the deployment at --frontend and nothing else of a run."""


@dataclass(frozen=True)
class RunConfig:
    """Everything one run needs to know; build it with `from_options`, check it with
    `validate`. `fault_matrix` is the kill-matrix mode (one fake per named fault)."""

    targets: str | None = None
    """`--targets FILE`: deployments given by URL, one table each (`model/targets_file.py`)."""
    frontend: str | None = None
    rl_url: str | None = None
    backend: str | None = None
    model: str | None = None
    dynamo_release: str | None = None
    worker_url: tuple[str, ...] = ()
    header: tuple[str, ...] = ()
    token_file: str | None = None
    token_env: str | None = None
    rl_header: tuple[str, ...] = ()
    rl_token_file: str | None = None
    rl_token_env: str | None = None
    admin_header: tuple[str, ...] = ()
    admin_token_file: str | None = None
    admin_token_env: str | None = None
    secret_query_param: tuple[str, ...] = ()
    request_trace: str | None = None
    eos_token_id: tuple[int, ...] = ()
    record_meta: str | None = None
    artifact_bundle: bool = False
    fake: tuple[str, ...] = ()
    fault: tuple[str, ...] = ()
    workers: int | None = None
    """None: each launcher's own default (`fake_workers`, 1 for a launched toy engine)."""
    migration_limit: int | None = None
    capability: tuple[str, ...] = ()
    launch: str | None = None
    docker_config: str | None = None
    engine_fault: tuple[str, ...] = ()
    dynamo_python: tuple[str, ...] = ()
    allow_mutations: bool = False
    worker: tuple[int, ...] = ()
    all_workers: bool = False
    worker_sample: int | None = None
    """None: `worker_sample.DEFAULT_SIZE`."""
    judge_every_worker: bool = False
    read_only: bool = False
    skip_crash_probes: bool = False
    update_model_path: tuple[str, ...] = ()
    reference_checkpoint: tuple[str, ...] = ()
    reference_python: str | None = None
    weight_transfer: tuple[str, ...] = ()
    restore_model_path: str | None = None
    record: tuple[str, ...] = ()
    report_dir: str = "conformance-report"
    overwrite: bool = False
    seed: int = 0
    examples: int = 8
    deadline: float = 30.0
    ca_bundle: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    insecure: bool = False
    proxy: str | None = None
    no_proxy: str | None = None
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
            if option.name.endswith("header"):  # `@FILE` reads the headers from a file
                value = tuple(f"@{resolve_path(v[1:])}" if v.startswith("@") else v for v in value)
            values[option.name] = value
        return cls(**values)

    @property
    def fake_workers(self) -> int:
        return 2 if self.workers is None else self.workers

    @property
    def report_path(self) -> Path:
        return Path(self.report_dir)

    def with_(self, **changes: Any) -> RunConfig:
        return replace(self, **changes)

    def validate(self) -> RunConfig:
        """Raise `ConfigurationError` naming the flags (or the targets file's table and key);
        return self when consistent. Every deployment's credentials are read first, so that no
        message after can show one."""
        flags = self.flag_deployment()
        flags.credentials()
        tables = load_targets(self.targets) if self.targets else ()
        for table in tables:
            table.credentials()
        unknown = unknown_ids_message(self.capability)
        if unknown:
            raise ConfigurationError(unknown)
        for flag, values, allowed in (
            ("--fake", list(self.fake), FAKES),
            ("--launch", [self.launch] if self.launch else [], LAUNCH_KINDS),
        ):
            for value in values:
                if value not in allowed:
                    raise ConfigurationError(
                        f"{flag}: expected one of {', '.join(allowed)}, observed {value!r}"
                    )
        self._check_targets(flags)
        flags.check(self.read_only)
        for table in tables:
            table.check(self.read_only)
        given_by_url = self.frontend or self.targets
        if self.fault and (given_by_url or self.launch) and not self.fake:
            raise ConfigurationError(
                "--fault breaks one of our fakes, and this run tests none: add --fake NAME "
                "(--fault does not change a deployment given by --frontend, --targets or "
                "--launch)"
            )
        if len(self.dynamo_python) > 1:
            if not (self.launch or "").startswith("dynamo-"):
                raise ConfigurationError(
                    "--dynamo-python given more than once: a release matrix needs --launch "
                    f"dynamo-* (observed --launch {self.launch or 'none'})"
                )
            repeated = sorted({p for p in self.dynamo_python if self.dynamo_python.count(p) > 1})
            if repeated:
                raise ConfigurationError(
                    f"--dynamo-python: expected each environment once, observed {repeated[0]} "
                    "more than once"
                )
        if self.migration_limit is not None and given_by_url and not (self.fake or self.launch):
            raise ConfigurationError(
                "--migration-limit sets the frontend the run starts (--fake, --launch dynamo-*); "
                f"a deployment at {'--frontend' if self.frontend else '--targets'} runs with its "
                "own, and the suite cannot kill its workers to see it"
            )
        if self.migration_limit is not None and self.launch == "docker":
            raise ConfigurationError(
                "--migration-limit: the --launch docker deployment file sets the frontend's "
                "arguments; give --migration-limit there"
            )
        real_launch = self.launch and self.launch not in TOY_LAUNCHES
        if self.workers is not None and real_launch and not self.fake:
            raise ConfigurationError(
                f"--workers sets our fakes and a --launch {' or '.join(TOY_LAUNCHES)} "
                f"deployment; --launch {self.launch} starts its own (one worker)"
            )
        if self.workers is not None and self.launch in TOY_LAUNCHES and self.workers < 1:
            raise ConfigurationError(
                f"--workers: expected an integer >= 1 for --launch {self.launch}, observed "
                f"{self.workers}"
            )
        if self.engine_fault and self.launch not in TOY_LAUNCHES:
            raise ConfigurationError(f"--engine-fault needs --launch {' or '.join(TOY_LAUNCHES)}")
        if self.docker_config and self.launch != "docker":
            raise ConfigurationError("--docker-config needs --launch docker")
        if self.launch == "docker" and not self.docker_config:
            raise ConfigurationError("--launch docker needs --docker-config FILE")
        if self.client_key and not self.client_cert:
            raise ConfigurationError("--client-key needs --client-cert (the certificate it signs)")
        if self.insecure and self.ca_bundle:
            raise ConfigurationError(
                "--insecure verifies no certificate, so --ca-bundle would be ignored: give one "
                "of them"
            )
        for name, value, low in (
            ("--examples", self.examples, 1),
            ("--workers", self.workers, 0),
            ("--migration-limit", self.migration_limit, 0),
            ("--budget-generations", self.budget_generations, 1),
            ("--worker-sample", self.worker_sample, 2),
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
            *(
                ("--dynamo-python", python, "`rl-conformance install-dynamo` prints one")
                for python in self.dynamo_python
            ),
            (
                "--reference-python",
                self.reference_python,
                "a Python with torch and transformers; `rl-conformance install-vllm` prints one",
            ),
            ("--docker-config", self.docker_config, "a deployment config, see deploy/docker"),
            ("--ca-bundle", self.ca_bundle, "a PEM file of CA certificates"),
            ("--client-cert", self.client_cert, "a PEM client certificate"),
            ("--client-key", self.client_key, "the PEM private key of --client-cert"),
        ):
            if path and not os.path.exists(path):
                raise ConfigurationError(f"{flag} {path}: no such file or directory ({what})")
        self.record_meta_document()
        self.recorded()
        return self

    def _check_targets(self, flags: Deployment) -> None:
        """With `--targets` and no `--frontend`, a deployment flag describes nothing: each
        deployment of the file takes it in its own table. (The flags that choose workers and
        checkpoints still apply to the deployments the run starts.)"""
        if not self.targets or self.frontend:
            return
        starts = self.fake or self.launch
        applies = () if starts else DEPLOYMENT_FIELDS
        stray = [name for name in flags.given() if name in applies or name in DESCRIBES]
        if stray:
            option = BY_NAME[stray[0]]
            raise ConfigurationError(
                f"{option.flag} describes the deployment at --frontend, and this run gives "
                f"none: a deployment of --targets takes {FILE_KEYS[stray[0]]} in its own table"
            )

    def flag_deployment(self) -> Deployment:
        """The deployment the flags describe (without `--frontend`, what they say of the
        workers and checkpoints of the deployments the run starts)."""
        return Deployment(**{name: getattr(self, name) for name in DEPLOYMENT_FIELDS})

    def deployments(self) -> tuple[Deployment, ...]:
        """The deployments given by URL: the one at `--frontend`, then each table of
        `--targets` in the file's order."""
        found = [self.flag_deployment()] if self.frontend else []
        if self.targets:
            found += load_targets(self.targets)
        return tuple(found)

    def credentials(self) -> Credentials:
        """The credentials of the deployment at --frontend, read (and registered with the
        redactor) now; `ConfigurationError` naming the flag for one that cannot be read."""
        return self.flag_deployment().credentials()

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
        return self.flag_deployment().weight_transfers()


def resolve_path(value: str | None) -> str | None:
    """A path flag's value as an absolute path on this machine (`~` expanded, symbolic links
    kept: a virtual environment's python is one); a URL (`scheme://...`) is kept as given."""
    if not value or "://" in value:
        return value
    return os.path.abspath(os.path.expanduser(value))


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
