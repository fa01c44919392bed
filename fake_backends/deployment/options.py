"""The fake deployment's options, each declared once (name, kind, default, flag, help).

`python -m fake_backends` declares its flags from `OPTIONS`, hands the parsed set whole to
`DeploymentOptions.build`, and the assembly reads the validated `DeploymentOptions`;
`FakeDeployment(**options)` and a launcher's command line (`command_line`) take the same names.
What is not an option of the deployment itself stays beside the command: where it listens
(`--host`, the ports), the faults switched on, the credentials each plane requires.

`DeploymentOptions.build` validates everything that can be wrong (backend, worker namespaces,
admin family, SGLang engine routes, the RL listener's listing order, the checkpoint the workers
start on, ...) before any socket is bound, so the command exits 2 with the reason and the
in-process API raises ValueError.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fake_backends.admin.sglang import resolve_engine_routes
from fake_backends.admin.sglang_routes import ENV_VAR as ENGINE_ROUTES_ENV
from fake_backends.admin.sglang_routes import EngineRouteDescriptor, parse_engine_routes
from fake_backends.deployment.ingress import INGRESS_CODINGS
from fake_backends.discovery.listener import LISTING_ORDERS
from fake_backends.model.tokenizer import VOCAB_SIZE
from fake_backends.runtime.personalities import ADMIN_FAMILIES, get_personality
from fake_backends.runtime.weights import path_weights
from fake_backends.runtime.workers import INITIAL_WEIGHTS, NAMESPACE


@dataclass(frozen=True)
class Option:
    """One option of the deployment: its keyword (`name`), its flag, how it parses."""

    name: str
    flag: str
    help: str
    kind: str = "str"  # str | int | float | flag | list
    default: Any = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None

    def declare(self, parser: argparse.ArgumentParser) -> None:
        kwargs: dict[str, Any] = {"dest": self.name, "help": self.help}
        if self.kind == "flag":
            kwargs.update(action="store_true", default=False)
        elif self.kind == "list":
            kwargs.update(action="append", default=self.default, metavar=self.metavar)
        else:
            kwargs.update(default=self.default, metavar=self.metavar)
            if self.kind in ("int", "float"):
                kwargs["type"] = int if self.kind == "int" else float
        if self.choices is not None:
            kwargs["choices"] = self.choices
        parser.add_argument(self.flag, **kwargs)

    def arguments(self, value: Any) -> list[str]:
        """`value` on a command line."""
        if self.kind == "flag":
            return [self.flag] if value else []
        if self.kind == "list":
            return [arg for item in value or () for arg in (self.flag, str(item))]
        return [] if value is None else [self.flag, str(value)]


OPTIONS: tuple[Option, ...] = (
    Option("workers", "--workers", "number of engine workers (default 2)", "int", 2),
    Option("model", "--model", "served model name (default toy)", default="toy"),
    Option(
        "worker_namespaces",
        "--worker-namespace",
        "Dynamo namespace of the next worker (repeatable, in worker order; default dynamo)",
        "list",
        [],
        metavar="NS",
    ),
    Option(
        "admin_family",
        "--admin-family",
        "vLLM only: Python worker RL routes (default) or the native sidecar's "
        "control/* and update/* routes",
        default="python",
        choices=ADMIN_FAMILIES,
    ),
    Option(
        "engine_routes",
        "--engine-route",
        "SGLang only: expose an engine method as /engine/<path>, "
        "path[=method][:engine|tm] (repeatable; default: $DYN_SGLANG_ENGINE_ROUTES)",
        "list",
        None,
        metavar="DESCRIPTOR",
    ),
    Option(
        "listing_order",
        "--rl-worker-order",
        "order of the RL listener's workers: sorted (default, as the real listener), or "
        "the same workers rotated or shuffled anew on every read (legal: clients must never "
        "read list position as identity)",
        default="sorted",
        choices=LISTING_ORDERS,
    ),
    Option(
        "migration_limit",
        "--migration-limit",
        "how many times the frontend moves a request whose worker's process died to "
        "another worker, continuing from the tokens so far (Dynamo's --migration-limit; "
        "default 0, Dynamo's default: never)",
        "int",
        0,
        metavar="N",
    ),
    Option(
        "initial_model_path",
        "--initial-model-path",
        "every worker starts with the weights an update_weights_from_disk of PATH gives "
        "(a cold start on that checkpoint; default: the toy model's initial weights)",
        metavar="PATH",
    ),
    Option(
        "ingress_coding",
        "--ingress-coding",
        "an ingress in front of the frontend compresses its JSON and event streams in this "
        "coding for clients that accept it, as nginx's gzip does (legal; default identity)",
        default="identity",
        choices=INGRESS_CODINGS,
    ),
    Option(
        "unpaused_update_status",
        "--unpaused-update-status",
        "vLLM only: the HTTP status a worker refuses a weight update while running with: "
        "200 (Dynamo's handled error, the default) or a 4xx of its own such as 409 (legal)",
        "int",
        200,
        metavar="STATUS",
    ),
    Option(
        "vocabulary",
        "--vocabulary",
        "the prompt ids the model takes: the frontend refuses a prompt id >= N with 400 "
        f"as a small model's engine does (default {VOCAB_SIZE}, the toy vocabulary)",
        "int",
        VOCAB_SIZE,
        metavar="N",
    ),
    Option(
        "admin_base_urls",
        "--admin-base-url",
        "every listed worker also carries world_size 2 and an admin_base_url apart from "
        "its system_url, as a tensor-parallel worker publishes them (legal)",
        "flag",
        False,
    ),
    Option(
        "engine_call_delay_ms",
        "--engine-call-delay-ms",
        "every worker /engine call takes this long before it acts, as a real engine's "
        "pause or weight update does (default 0)",
        "float",
        0.0,
        metavar="MS",
    ),
    Option(
        "dynamo_release",
        "--dynamo-release",
        "the Dynamo release whose frontend to play (1.6.1: one nvext.metadata_upload "
        "form; default: the newest the fakes know). Never published as Dynamo's version: a "
        "suite reaching this fake by URL is told with its own --dynamo-release",
        metavar="RELEASE",
    ),
)
BY_NAME: Mapping[str, Option] = {option.name: option for option in OPTIONS}


def add_options(parser: argparse.ArgumentParser) -> None:
    for option in OPTIONS:
        option.declare(parser)


def parsed(args: argparse.Namespace) -> dict[str, Any]:
    """The options of a parsed command line, by name (for `DeploymentOptions.build`)."""
    return {option.name: getattr(args, option.name) for option in OPTIONS}


def command_line(**values: Any) -> list[str]:
    """The `python -m fake_backends` arguments giving these options (a name outside `OPTIONS`
    raises TypeError, as an unknown keyword does)."""
    unknown = sorted(set(values) - BY_NAME.keys())
    if unknown:
        raise TypeError(f"no fake deployment option named {', '.join(unknown)}")
    return [arg for name, value in values.items() for arg in BY_NAME[name].arguments(value)]


@dataclass(frozen=True)
class DeploymentOptions:
    """A validated deployment configuration (everything but the sockets, the faults and the
    credentials); the fields are `OPTIONS`' names, held together by a test."""

    backend: str
    workers: int
    model: str
    worker_namespaces: tuple[str, ...]
    admin_family: str
    engine_routes: tuple[EngineRouteDescriptor, ...]
    listing_order: str
    migration_limit: int
    """How many times the frontend moves a request whose worker's process died to another
    worker (Dynamo's ``--migration-limit``; 0, its default: never)."""
    initial_model_path: str | None
    """The checkpoint every worker starts on (the weights an ``update_weights_from_disk`` of
    this path gives); None: the toy model's initial weights."""
    ingress_coding: str
    """The content coding an ingress in front of the frontend compresses its JSON and event
    streams in, for a client that accepts it (``ingress.CompressingIngress``)."""
    unpaused_update_status: int
    """The HTTP status a vLLM worker refuses an update while running with: 200 (Dynamo's
    handled error) or a 4xx of the worker's own (409, as lmdeploy answers)."""
    vocabulary: int
    """The prompt ids the model takes: fewer than the toy vocabulary's makes the frontend refuse
    prompt ids at or beyond it, as a small model's engine does (``refuse_beyond_vocabulary``)."""
    admin_base_urls: bool
    """Each listed worker also carries ``world_size`` 2 and an ``admin_base_url`` apart from its
    ``system_url``, as a tensor-parallel worker publishes them (legal: clients administer a
    worker at its ``system_url``)."""
    engine_call_delay_ms: float
    dynamo_release: str | None
    """The Dynamo release whose frontend the deployment plays (None: the newest the fakes
    know); never published as Dynamo's version."""

    @classmethod
    def build(cls, backend: str, **given: Any) -> DeploymentOptions:
        """Validate `given` over `OPTIONS`' defaults; ``engine_routes`` None means the
        ``DYN_SGLANG_ENGINE_ROUTES`` variable."""
        unknown = sorted(set(given) - BY_NAME.keys())
        if unknown:
            raise TypeError(f"no fake deployment option named {', '.join(unknown)}")
        values = {option.name: option.default for option in OPTIONS} | given
        personality = get_personality(backend)
        workers = values["workers"]
        if workers < 0:
            raise ValueError("workers must be >= 0")
        namespaces = tuple(values["worker_namespaces"])
        if len(namespaces) > workers:
            raise ValueError(f"{len(namespaces)} worker namespaces given for {workers} worker(s)")
        values["worker_namespaces"] = namespaces
        _check_admin_family(personality.name, values["admin_family"])
        values["engine_routes"] = _engine_routes(personality.name, values["engine_routes"])
        _check(values)
        return cls(backend=personality.name, **values)

    @property
    def initial_weights(self) -> str:
        """The weights tag every worker starts with."""
        if self.initial_model_path is None:
            return INITIAL_WEIGHTS
        return path_weights(self.initial_model_path)

    @property
    def engine_call_delay_s(self) -> float:
        return max(0.0, self.engine_call_delay_ms) / 1000

    def namespace_of(self, index: int) -> str:
        return self.worker_namespaces[index] if index < len(self.worker_namespaces) else NAMESPACE


def _engine_routes(backend: str, given: Any) -> tuple[EngineRouteDescriptor, ...]:
    if given is not None and backend != "sglang":
        if given:
            raise ValueError("--engine-route allowlists SGLang methods; it needs backend sglang")
        return ()
    if backend != "sglang":
        return ()
    descriptors = parse_engine_routes(os.environ.get(ENGINE_ROUTES_ENV) if given is None else given)
    resolve_engine_routes(descriptors)  # unknown or colliding methods fail now
    return tuple(descriptors)


def _check_admin_family(backend: str, admin_family: str) -> None:
    if admin_family not in ADMIN_FAMILIES:
        raise ValueError(
            f"unknown admin family {admin_family!r}; choose one of: {', '.join(ADMIN_FAMILIES)}"
        )
    if admin_family != "python" and backend != "vllm":
        raise ValueError("--admin-family selects a vLLM route family; it needs backend vllm")


def _check(values: Mapping[str, Any]) -> None:
    if values["listing_order"] not in LISTING_ORDERS:
        raise ValueError(
            f"unknown listing order {values['listing_order']!r}; choose one of: "
            f"{', '.join(LISTING_ORDERS)}"
        )
    if values["initial_model_path"] is not None and not values["initial_model_path"]:
        raise ValueError("the initial model path must not be empty")
    if values["ingress_coding"] not in INGRESS_CODINGS:
        raise ValueError(
            f"unknown ingress coding {values['ingress_coding']!r}; choose one of: "
            f"{', '.join(INGRESS_CODINGS)}"
        )
    status = values["unpaused_update_status"]
    if status != 200 and not 400 <= status < 500:
        raise ValueError(f"the unpaused update status must be 200 or a 4xx, not {status}")
    vocabulary = values["vocabulary"]
    if not 1 <= vocabulary <= VOCAB_SIZE:
        raise ValueError(f"the vocabulary must hold 1 to {VOCAB_SIZE} ids, not {vocabulary}")
    if values["migration_limit"] < 0:
        raise ValueError(f"the migration limit must be >= 0, not {values['migration_limit']}")
