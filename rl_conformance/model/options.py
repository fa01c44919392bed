"""The table of a run's options: each declared once, for the `rl-conformance run` command line
and for the pytest plugin (`--rl-*`), with its flag, default and help."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from .releases import RELEASES

OVERWRITE_HELP = (
    "replace the report a previous run left in --report-dir (cleared first; never a "
    "directory holding files no run wrote)"
)
BACKENDS = ("vllm", "sglang", "trtllm")
FAKES = ("vllm", "sglang", "trtllm", "vllm-sidecar")
"""Our fake deployments: one per backend, and vLLM with the native sidecar's routes."""
TOY_LAUNCHES = ("dynamo-fake-vllm", "dynamo-fake-sglang")
LAUNCH_KINDS = (
    "dynamo-mocker",
    *TOY_LAUNCHES,
    "dynamo-vllm",
    "dynamo-vllm-tied",
    "dynamo-vllm-bf16",
    "dynamo-sglang",
    "dynamo-sglang-bf16",
    "docker",
)


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


def _credential_options(
    plane: str, flag_prefix: str, name_prefix: str, pytest_prefix: str, inherits: str
) -> tuple[Option, ...]:
    """A plane's three credential options (`model/credentials.py` has the rules)."""
    return (
        Option(
            f"{name_prefix}header",
            f"--{flag_prefix}header",
            f"a header sent with every request to the {plane}, as curl's -H takes it "
            f"(repeatable; @FILE reads one header per line){inherits}",
            kind="list",
            metavar="'NAME: VALUE'",
            pytest_flag=f"--rl-{pytest_prefix}header",
        ),
        Option(
            f"{name_prefix}token_file",
            f"--{flag_prefix}token-file",
            f"a file whose first line is the bearer token for the {plane} (sent as "
            "Authorization: Bearer TOKEN)",
            metavar="FILE",
            path=True,
            pytest_flag=f"--rl-{pytest_prefix}token-file",
        ),
        Option(
            f"{name_prefix}token_env",
            f"--{flag_prefix}token-env",
            f"an environment variable holding the bearer token for the {plane}",
            metavar="VAR",
            pytest_flag=f"--rl-{pytest_prefix}token-env",
        ),
    )


CREDENTIAL_OPTIONS: tuple[Option, ...] = (
    *_credential_options(
        "frontend",
        "",
        "",
        "frontend-",
        "; the RL listener receives the frontend's credentials too, unless given its own",
    ),
    *_credential_options(
        "RL listener",
        "rl-",
        "rl_",
        "",
        "; replaces an inherited header of the same name, and 'NAME:' removes it",
    ),
    *_credential_options(
        "workers' system servers",
        "admin-",
        "admin_",
        "admin-",
        "; they never receive the frontend's credentials",
    ),
    Option(
        "secret_query_param",
        "--secret-query-param",
        "a query parameter of --frontend, --rl-url or --worker-url that is a secret (an API "
        "key a gateway takes in the URL; repeatable): sent, and never written",
        kind="list",
        metavar="NAME",
    ),
)
"""Credentials of the deployment at --frontend; every value is kept out of what a run writes."""
CREDENTIAL_FLAGS = tuple(option.flag for option in CREDENTIAL_OPTIONS)


OPTIONS: tuple[Option, ...] = (
    Option(
        "targets",
        "--targets",
        "a TOML file of deployments to test by URL, one table per deployment: its name is the "
        "deployment's column, its keys the deployment flags' names (frontend, rl_url, backend, "
        "token_env, allow_mutations, workers, update_model_paths, ...; docs/DEPLOYMENTS.md)",
        metavar="FILE",
        path=True,
    ),
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
    *CREDENTIAL_OPTIONS,
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
        "artifact_bundle",
        "--artifact-bundle",
        "also write the evidence as Dynamo's dynamo.rl.artifact-bundle.v1 index "
        "(artifact-bundle.json; check it with rl-conformance check-artifact-bundle)",
        kind="flag",
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
    Option(
        "workers",
        "--workers",
        "RL workers per fake deployment (default 2), or of a --launch dynamo-fake-* deployment "
        "(default 1)",
        kind="int",
        metavar="N",
    ),
    Option(
        "migration_limit",
        "--migration-limit",
        "the --migration-limit the run starts a frontend with (--fake, --launch dynamo-*): how "
        "many times a request whose worker died moves to another worker (default: 3 for our "
        "fakes, 0 for a launched Dynamo, as Dynamo's own default); for migration.continuity",
        kind="int",
        metavar="N",
    ),
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
        "python of a virtual environment with ai-dynamo (as install-dynamo and install-vllm "
        "make them); repeated with --launch dynamo-*, one column per environment, launched one "
        "after another: a release matrix",
        kind="list",
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
        "worker_sample",
        "--worker-sample",
        "how many selected workers a control effect the spec does not ask of every worker is "
        "judged on (a pause's effect, a held request, a cache flush; default 4: the first, the "
        "last and spread between by identity); what the spec asks of every worker (the version "
        "and the generation after an update) is judged on each",
        kind="int",
        metavar="N",
    ),
    Option(
        "judge_every_worker",
        "--judge-every-worker",
        "judge every control effect on every selected worker, not on a sample "
        "(--worker-sample); a night then costs more with every worker",
        kind="flag",
    ),
    Option(
        "read_only",
        "--read-only",
        "send no mutating call at all, not even to our fakes",
        kind="flag",
    ),
    Option(
        "skip_crash_probes",
        "--skip-crash-probes",
        "leave out the probes that may end the worker they are sent to (an invalid pause mode, "
        "a second pause, a memory release, an update during an in-place pause: each named, "
        "with the reason, before the first test); each is then skipped naming this flag. "
        "Without it they run after every other test of their target",
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
        "restore_model_path",
        "--restore-model-path",
        "the checkpoint the selected workers served before the run, as their engine loads it: "
        "a mutating run updates them back to it at its end when the deployment does not report "
        "its served model path (SGLang's get_model_info, or discovery's model when that is an "
        "absolute path), and uses it over a reported one",
        metavar="PATH",
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
        "where matrix.json, matrix.md, junit.xml and matrix.html go (default ./conformance-report)",
        default="conformance-report",
        metavar="DIR",
        path=True,
    ),
    Option(
        "overwrite",
        "--overwrite",
        OVERWRITE_HELP,
        kind="flag",
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
        "ca_bundle",
        "--ca-bundle",
        "PEM file (or directory) of the CAs that sign the deployment's https certificates, in "
        "place of the default ones, as curl's --cacert (default: $REQUESTS_CA_BUNDLE, "
        "$CURL_CA_BUNDLE, $SSL_CERT_FILE or $SSL_CERT_DIR, the first set, else certifi's CAs)",
        metavar="FILE",
        path=True,
    ),
    Option(
        "client_cert",
        "--client-cert",
        "PEM client certificate shown to https servers that ask for one (mutual TLS), with its "
        "unencrypted key in the same file or in --client-key",
        metavar="FILE",
        path=True,
    ),
    Option(
        "client_key",
        "--client-key",
        "the unencrypted PEM private key of --client-cert, when it is in a file of its own",
        metavar="FILE",
        path=True,
    ),
    Option(
        "insecure",
        "--insecure",
        "verify no https certificate, as curl's -k: any server can answer for the deployment, "
        "and every report of the run says so in its first line",
        kind="flag",
    ),
    Option(
        "proxy",
        "--proxy",
        "HTTP proxy for every request, http://HOST:PORT (https goes through its CONNECT "
        "tunnel; default: $https_proxy or $HTTPS_PROXY for https URLs, $http_proxy or "
        "$HTTP_PROXY for http ones, else $all_proxy or $ALL_PROXY, where credentials belong: "
        "http://USER:PASSWORD@HOST:PORT; the deployments the run starts itself are reached "
        "directly)",
        metavar="URL",
    ),
    Option(
        "no_proxy",
        "--no-proxy",
        "hosts reached without the proxy, as curl's --noproxy: comma-separated names (each "
        "covers its subdomains), IP addresses or CIDR ranges, or * for all (default: $no_proxy "
        "or $NO_PROXY; '' sends every host through the proxy)",
        metavar="HOSTS",
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


DEPLOYMENT_OPTIONS: tuple[str, ...] = (
    "frontend",
    "rl_url",
    "backend",
    "model",
    "dynamo_release",
    "worker_url",
    *(option.name for option in CREDENTIAL_OPTIONS),
    "request_trace",
    "eos_token_id",
    "allow_mutations",
    "worker",
    "all_workers",
    "update_model_path",
    "reference_checkpoint",
    "weight_transfer",
    "restore_model_path",
)
"""The options that describe one deployment given by URL (`model/deployment.py`): the flags
give one, each table of a `--targets` file another."""
BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for option in OPTIONS:
        option.declare(parser.add_argument, option.flag, option.name)


def add_pytest_options(group: Any) -> None:
    for option in OPTIONS:
        option.declare(group.addoption, option.pytest, "rl_" + option.name)
