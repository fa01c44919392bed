"""One deployment given by URL: its URLs, backend, model, credentials, the workers the run may
change on it and the checkpoints it updates to.

The command line gives one (`--frontend`, `--rl-url`, `--backend`, ... the options of
`options.DEPLOYMENT_OPTIONS`); each table of a `--targets` file gives another
(`targets_file.py`). Both become a `Deployment` and are checked by the same rules
(`Deployment.check`), whose messages name the input as it was given (`Naming`): the flag
(`--update-model-path: ...`) or the file, the table and the key
(`fleets.toml [vllm-prod] update_model_paths: ...`). A file's keys are the flags' names
(`--rl-url` is `rl_url`), plural for a repeatable flag (`--worker-url` is `worker_urls`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from urllib.parse import urlsplit

from ..errors import ConfigurationError
from .credentials import (
    FRONTEND,
    LISTENER,
    PLANES,
    URL_FLAGS,
    WORKERS,
    Credentials,
    PlaneFlags,
    read_credentials,
)
from .options import BACKENDS, BY_NAME, CREDENTIAL_OPTIONS, DEPLOYMENT_OPTIONS
from .weight_transfer import WeightTransfer, load_weight_transfer

LISTS = ("list", "int-list")
FILE_KEYS: Mapping[str, str] = {
    name: name + ("s" if BY_NAME[name].kind in LISTS else "") for name in DEPLOYMENT_OPTIONS
}
"""Option name -> its key in a targets file's table: the flag's name, plural when repeatable."""
DESCRIBING = (
    "rl_url",
    "backend",
    "model",
    "worker_url",
    "dynamo_release",
    "request_trace",
    "eos_token_id",
)
"""The flags that describe the deployment at --frontend and nothing else of a run."""
CREDENTIALS = tuple(option.name for option in CREDENTIAL_OPTIONS)
UPDATES = (("update_model_path", "PATH"), ("weight_transfer", "FILE"))
PLANE_PREFIXES = ((FRONTEND, ""), (LISTENER, "rl_"), (WORKERS, "admin_"))


@dataclass(frozen=True)
class Naming:
    """How messages name a deployment's inputs: the flags (`file` empty), or the keys of a
    targets file's table."""

    file: str = ""
    table: str = ""

    @property
    def where(self) -> str:
        return f"{self.file} [{self.table}]" if self.file else ""

    def key(self, name: str) -> str:
        """The flag, or the table's key, of option `name`."""
        return FILE_KEYS[name] if self.file else BY_NAME[name].flag

    def at(self, name: str) -> str:
        """Option `name` as a message's subject: the flag, or the file, table and key."""
        return f"{self.where} {self.key(name)}" if self.file else self.key(name)

    def listing(self, names: list[str]) -> str:
        """Several options as a message's subject (`--rl-url and --model`)."""
        keys = [self.key(name) for name in names]
        joined = keys[0] if len(keys) == 1 else f"{', '.join(keys[:-1])} and {keys[-1]}"
        return f"{self.where} {joined}" if self.file else joined

    def give(self, name: str, metavar: str = "") -> str:
        """How to give option `name`: `--worker INSTANCE_ID`, or `workers = [INSTANCE_ID]`."""
        option = BY_NAME[name]
        shown = metavar or option.metavar or "VALUE"
        if not self.file:
            return option.flag if option.kind == "flag" else f"{option.flag} {shown}"
        key = self.key(name)
        if option.kind == "flag":
            return f"{key} = true"
        if option.kind == "int-list":
            return f"{key} = [{shown}]"
        if option.kind == "list":
            return f'{key} = ["{shown}"]'
        return f'{key} = "{shown}"'

    def another(self, name: str, metavar: str) -> str:
        """How to give one more value of a repeatable option."""
        if self.file:
            return f"a second {metavar} in {self.key(name)}"
        return f"a second {BY_NAME[name].flag} {metavar}"

    @property
    def deployment(self) -> str:
        """The deployment, as a message names it."""
        return f"the deployment {self.where}" if self.file else "the deployment at --frontend"

    @property
    def allow_mutations(self) -> str:
        """What allows mutating calls on this deployment's workers."""
        return (
            f"{self.give('allow_mutations')} with {self.give('worker', 'INSTANCE_ID')} or "
            f"{self.give('all_workers')}" + (f" in {self.where}" if self.file else "")
        )

    def planes(self) -> Mapping[str, PlaneFlags]:
        """How each plane's credentials are given: the flags, or this table's keys (and the
        variables a reproducer reads a value from, prefixed with the table's name)."""
        if not self.file:
            return PLANES
        stem = re.sub(r"[^A-Za-z0-9]+", "_", self.table).strip("_").upper()
        stem = stem if stem and not stem[0].isdigit() else f"T_{stem}"
        return {
            key: PlaneFlags(
                PLANES[key].title,
                self.key(f"{prefix}header"),
                self.key(f"{prefix}token_file"),
                self.key(f"{prefix}token_env"),
                f"{stem}_{PLANES[key].prefix}",
                self.where,
            )
            for key, prefix in PLANE_PREFIXES
        }

    def url_flags(self) -> Mapping[str, str]:
        if not self.file:
            return URL_FLAGS
        return {FRONTEND: "frontend", LISTENER: "rl_url", WORKERS: "worker_urls"}


FLAGS = Naming()


@dataclass(frozen=True)
class Deployment:
    """The options of one deployment given by URL (`options.DEPLOYMENT_OPTIONS`, with
    `RunConfig`'s types and defaults), its column's name and how messages name its inputs."""

    naming: Naming = FLAGS
    name: str = ""
    """Its column in the matrix; "" for the flags' deployment (`external-<backend>`)."""
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
    allow_mutations: bool = False
    worker: tuple[int, ...] = ()
    all_workers: bool = False
    update_model_path: tuple[str, ...] = ()
    reference_checkpoint: tuple[str, ...] = ()
    weight_transfer: tuple[str, ...] = ()
    restore_model_path: str | None = None

    @property
    def target_id(self) -> str:
        return self.name or f"external-{self.backend}"

    def given(self, names: tuple[str, ...] = DEPLOYMENT_OPTIONS) -> list[str]:
        """The options of `names` that were given (not empty), in their order."""
        return [name for name in names if getattr(self, name)]

    def credentials(self) -> Credentials:
        """Its credentials, read (and registered with the redactor) now; `ConfigurationError`
        naming the input for one that cannot be read."""
        return read_credentials(
            frontend=self.frontend,
            rl_url=self.rl_url,
            worker_urls=self.worker_url,
            headers={FRONTEND: self.header, LISTENER: self.rl_header, WORKERS: self.admin_header},
            token_files={
                FRONTEND: self.token_file,
                LISTENER: self.rl_token_file,
                WORKERS: self.admin_token_file,
            },
            token_envs={
                FRONTEND: self.token_env,
                LISTENER: self.rl_token_env,
                WORKERS: self.admin_token_env,
            },
            secret_query_params=self.secret_query_param,
            planes=self.naming.planes(),
            url_flags=self.naming.url_flags(),
        )

    def weight_transfers(self) -> tuple[WeightTransfer, ...]:
        """The weight transfer files, parsed (ConfigurationError naming the file and field)."""
        given_by = self.naming.at("weight_transfer")
        return tuple(load_weight_transfer(path, given_by) for path in self.weight_transfer)

    def check(self, read_only: bool = False) -> Deployment:
        """Raise `ConfigurationError` naming the input (see `Naming`); return self when
        consistent. The credentials are read first, so that no message after can show one.
        Without a frontend (the flags of a run that tests no deployment by URL), the options
        that choose workers and checkpoints are still checked: they apply to what the run
        starts."""
        self.credentials()
        naming = self.naming
        self._check_description()
        if self.frontend and self.rl_url and same_url(self.frontend, self.rl_url):
            raise ConfigurationError(
                f"{naming.at('rl_url')} {self.rl_url} is the {naming.key('frontend')} URL: "
                "Dynamo serves discovery on its own RL listener (port 8001 by default; the "
                "frontend's is 8000): give the RL listener's URL, or leave "
                f"{naming.key('rl_url')} out (the rows that need it are then skipped)"
            )
        urls = [("frontend", self.frontend), ("rl_url", self.rl_url)]
        for name, url in [*urls, *(("worker_url", url) for url in self.worker_url)]:
            if url and not url.startswith(("http://", "https://")):
                raise ConfigurationError(
                    f"{naming.at(name)}: expected an http(s) URL, observed {url!r}"
                )
        if len(self.reference_checkpoint) > len(self.update_model_path):
            raise ConfigurationError(
                f"{naming.at('reference_checkpoint')}: expected at most one per "
                f"{naming.key('update_model_path')} ({len(self.update_model_path)} given), "
                f"observed {len(self.reference_checkpoint)}"
            )
        self._check_mutations(read_only)
        for local in self.reference_checkpoint:
            if not os.path.exists(local):
                raise ConfigurationError(
                    f"{naming.at('reference_checkpoint')} {local}: no such file or directory "
                    "(a readable copy of the checkpoint, here)"
                )
        self.weight_transfers()
        for name, metavar in UPDATES:
            given = getattr(self, name)
            if len(given) == 1:
                raise ConfigurationError(
                    f"{naming.at(name)}: expected two (consecutive updates alternate between "
                    "them, so that every update changes the weights served), observed one "
                    f"({given[0]}): give {naming.another(name, metavar)}"
                )
        return self

    def _check_description(self) -> None:
        """What the deployment is: a frontend, its backend, its end-of-sequence ids."""
        naming = self.naming
        if self.backend and self.backend not in BACKENDS:
            raise ConfigurationError(
                f"{naming.at('backend')}: expected one of {', '.join(BACKENDS)}, observed "
                f"{self.backend!r}"
            )
        for token in self.eos_token_id:
            if token < 0:
                raise ConfigurationError(
                    f"{naming.at('eos_token_id')}: expected a token id >= 0, observed {token}"
                )
        if self.frontend and not self.backend:
            raise ConfigurationError(
                f"{naming.at('frontend')} needs {naming.key('backend')} {{vllm|sglang|trtllm}}"
            )
        described = self.given() if naming.file else self.given(DESCRIBING)
        if described and not self.frontend:
            verb = "describes" if len(described) == 1 else "describe"
            raise ConfigurationError(
                f"{naming.listing(described)} {verb} an external deployment: give "
                f"{naming.give('frontend', 'URL')} too"
            )
        credentials = self.given(CREDENTIALS)
        if credentials and not self.frontend:
            raise ConfigurationError(
                f"{naming.at(credentials[0])} gives credentials of the deployment at "
                f"{naming.key('frontend')}: give {naming.give('frontend', 'URL')} too (the "
                "deployments the run starts take none)"
            )

    def _check_mutations(self, read_only: bool) -> None:
        """The live-fleet rule: mutating calls only with explicit opt-in and chosen workers."""
        naming = self.naming
        if self.worker and self.all_workers:
            raise ConfigurationError(
                f"{naming.at('worker')} and {naming.key('all_workers')} exclude each other"
            )
        if (self.worker or self.all_workers) and not self.allow_mutations:
            raise ConfigurationError(
                f"{naming.at('worker')}/{naming.key('all_workers')} choose targets for mutating "
                f"calls: add {naming.give('allow_mutations')}"
            )
        if self.allow_mutations and not (self.worker or self.all_workers):
            raise ConfigurationError(
                f"{naming.at('allow_mutations')} needs {naming.give('worker', 'INSTANCE_ID')} "
                f"{'' if naming.file else '(repeatable) '}or {naming.give('all_workers')}"
            )
        if self.allow_mutations and read_only:
            raise ConfigurationError(
                f"{naming.at('allow_mutations')} and --read-only exclude each other"
            )
        updates = self.given(tuple(name for name, _ in UPDATES))
        if updates and read_only:
            raise ConfigurationError(
                f"{naming.listing(updates)} and --read-only exclude each other"
            )
        if updates and self.frontend and not self.allow_mutations:
            raise ConfigurationError(
                f"{naming.listing(updates)} drive weight updates, mutating calls on "
                f"{naming.deployment}: add {naming.allow_mutations}"
            )


DEPLOYMENT_FIELDS = tuple(f.name for f in fields(Deployment) if f.name not in ("naming", "name"))


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
