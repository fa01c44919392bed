"""`rl-conformance`: run the suites and write the matrix, validate captured bodies, list things.

rl-conformance run                                  all three fake deployments
rl-conformance run --frontend URL --rl-url URL --backend vllm [--model M]
rl-conformance validate SCHEMA FILE                 a captured JSON body or SSE transcript
rl-conformance capabilities                         the capability registry
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from . import __version__
from .capabilities import CAPABILITIES
from .checks import schema_check
from .dynamo_install import DYNAMO_VERSION, install
from .errors import ConfigurationError, LaunchError
from .schema_registry import schema_names
from .sse import SSEDecodeError, SSEParser
from .wire import BodyNotJSON, parse_json

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rl-conformance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the conformance suites and write the matrix")
    run.add_argument("--frontend", metavar="URL", help="frontend URL of an external deployment")
    run.add_argument("--rl-url", metavar="URL", help="RL discovery listener URL")
    run.add_argument(
        "--backend", choices=["vllm", "sglang", "trtllm"], help="backend of the external deployment"
    )
    run.add_argument("--model", help="model to request (default: the one /v1/models lists)")
    run.add_argument(
        "--fake",
        action="append",
        choices=["vllm", "sglang", "trtllm"],
        help="test one of our fake deployments (repeatable; default: all three "
        "when no --frontend is given)",
    )
    run.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME",
        help="start the fakes with this named fault (repeatable)",
    )
    run.add_argument(
        "--capability", action="append", metavar="ID", help="run only this capability (repeatable)"
    )
    run.add_argument(
        "--launch",
        choices=["dynamo-mocker", "dynamo-fake-vllm", "docker"],
        help="start a deployment: the real Dynamo with its mocker or with our fake "
        "engine (needs `rl-conformance install-dynamo`), or containers",
    )
    run.add_argument(
        "--docker-config", metavar="FILE", help="deployment config for --launch docker"
    )
    run.add_argument(
        "--engine-fault",
        action="append",
        default=[],
        metavar="NAME",
        help="engine fault for --launch dynamo-fake-vllm (repeatable)",
    )
    run.add_argument(
        "--dynamo-python", metavar="PATH", help="python of a virtual environment with ai-dynamo"
    )
    run.add_argument(
        "--allow-mutations",
        action="store_true",
        help="allow mutating admin calls on the chosen workers (never by default, "
        "except on our own fakes)",
    )
    run.add_argument(
        "--worker",
        action="append",
        default=[],
        type=int,
        metavar="INSTANCE_ID",
        help="a worker mutating calls may target (repeatable)",
    )
    run.add_argument(
        "--all-workers",
        action="store_true",
        help="mutating calls may target every advertised worker",
    )
    run.add_argument(
        "--read-only",
        action="store_true",
        help="send no mutating call at all, not even to our fakes",
    )
    run.add_argument(
        "--worker-url",
        action="append",
        default=[],
        metavar="URL",
        help="system URL of a worker that discovery does not list (SGLang, TensorRT-LLM; "
        "repeatable): its administration and its metrics",
    )
    run.add_argument(
        "--update-model-path",
        action="append",
        default=[],
        metavar="PATH",
        help="checkpoint for weight-update tests on a real engine (give two)",
    )
    run.add_argument("--report-dir", default="conformance-report", metavar="DIR")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument(
        "--examples", type=int, default=8, help="hypothesis examples per property test (default 8)"
    )
    run.add_argument(
        "--deadline", type=float, default=30.0, help="per-request deadline in seconds (default 30)"
    )
    run.add_argument(
        "--run-timeout",
        type=float,
        metavar="SECONDS",
        help="stop the whole run after this many seconds; the matrix is still written, "
        "marked incomplete (default: no limit)",
    )
    run.add_argument(
        "--shrink",
        action="store_true",
        help="minimise each failing generated example (many more requests; off by default: "
        "every failure already carries the exchange that failed and its curl reproducer)",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="print only the matrix")
    run.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print pytest's report of every failed test (the matrix always has the evidence)",
    )
    run.add_argument("pytest_args", nargs="*", help="extra arguments for pytest (after --)")

    validate = commands.add_parser("validate", help="validate a captured body or SSE transcript")
    validate.add_argument("schema", help=f"one of: {', '.join(schema_names())}")
    validate.add_argument("file", type=Path)

    commands.add_parser("capabilities", help="list the capability registry")

    kill = commands.add_parser(
        "kill-matrix",
        help="run the suite against every named fault of "
        "our fakes and report what each check kills",
    )
    kill.add_argument("--report-dir", default="kill-matrix-report", metavar="DIR")
    kill.add_argument("--examples", type=int, default=4)
    kill.add_argument("--seed", type=int, default=0)

    passthrough = commands.add_parser(
        "passthrough",
        help="engine faults through the real Dynamo frontend: rejected, repaired "
        "or passed through, and caught by the suite or not",
    )
    passthrough.add_argument("--report-dir", default="passthrough-report", metavar="DIR")
    passthrough.add_argument("--dynamo-python", metavar="PATH")
    passthrough.add_argument(
        "--engine-fault",
        action="append",
        default=[],
        metavar="NAME",
        help="only these faults (default: every engine fault)",
    )

    install = commands.add_parser(
        "install-dynamo", help="install the real Dynamo into its own virtual environment"
    )
    install.add_argument("--venv", default=".venv-dynamo", type=Path)
    install.add_argument("--version", dest="dynamo_version", default=DYNAMO_VERSION)
    return parser


def suites_dir() -> Path:
    return Path(str(resources.files("rl_conformance.suites")))


def pytest_arguments(args: argparse.Namespace, ini_path: Path) -> list[str]:
    argv = [
        str(suites_dir()),
        "-c",
        str(ini_path),
        "--rootdir",
        str(suites_dir()),
        "-p",
        "no:cacheprovider",
        "--rl-report-dir",
        args.report_dir,
        "--rl-seed",
        str(args.seed),
        "--rl-examples",
        str(args.examples),
        "--rl-deadline",
        str(args.deadline),
    ]
    if args.verbose:
        argv += ["-rfE", "--tb=short"]
    else:
        argv += ["-q", "-rN", "--tb=no", *(["--no-header"] if args.quiet else [])]
    if not args.shrink:
        argv.append("--rl-no-shrink")
    if args.run_timeout is not None:
        if args.run_timeout <= 0:
            raise ConfigurationError(
                "--run-timeout: expected a positive number of seconds, "
                f"observed {args.run_timeout:g}"
            )
        argv += ["--rl-run-timeout", str(args.run_timeout)]
    if args.frontend:
        argv += ["--rl-frontend", args.frontend, "--rl-backend", args.backend or ""]
        if args.rl_url:
            argv += ["--rl-url", args.rl_url]
        if args.model:
            argv += ["--rl-model", args.model]
    elif args.rl_url or args.backend or args.model or args.worker_url:
        raise ConfigurationError(
            "--rl-url, --backend, --model and --worker-url describe an external deployment: "
            "give --frontend URL too"
        )
    if args.launch:
        argv += ["--rl-launch", args.launch]
    if args.docker_config:
        argv += ["--rl-docker-config", args.docker_config]
    if args.dynamo_python:
        argv += ["--rl-dynamo-python", args.dynamo_python]
    for fault in args.engine_fault:
        argv += ["--rl-engine-fault", fault]
    for flag, value in (
        ("--rl-allow-mutations", args.allow_mutations),
        ("--rl-all-workers", args.all_workers),
        ("--rl-read-only", args.read_only),
    ):
        if value:
            argv.append(flag)
    for worker in args.worker:
        argv += ["--rl-worker", str(worker)]
    for url in args.worker_url:
        argv += ["--rl-worker-url", url]
    for path in args.update_model_path:
        argv += ["--rl-update-model-path", path]
    for name in args.fake or []:
        argv += ["--rl-fake", name]
    for fault in args.fault:
        argv += ["--rl-fault", fault]
    for capability_id in args.capability or []:
        argv += ["--rl-capability", capability_id]
    return argv + list(args.pytest_args)


def command_run(args: argparse.Namespace) -> int:
    import pytest

    if args.frontend and not args.backend:
        raise ConfigurationError("--frontend needs --backend {vllm|sglang|trtllm}")
    with tempfile.TemporaryDirectory(prefix="rl-conformance-") as scratch:
        ini = Path(scratch) / "pytest.ini"
        ini.write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
        try:
            code = pytest.main(pytest_arguments(args, ini))
        except Exception as exc:  # a harness bug: say so in one line; the matrix is written
            print(f"rl-conformance: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
            code = pytest.ExitCode.TESTS_FAILED
    matrix_path = Path(args.report_dir) / "matrix.json"
    if code in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR):
        return EXIT_USAGE
    if not matrix_path.exists():
        print(
            f"rl-conformance: no matrix was written ({matrix_path}); pytest exit code {code}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    matrix = json.loads(matrix_path.read_text())
    if not matrix["complete"]:
        print(
            f"rl-conformance: incomplete run ({matrix.get('incomplete_reason', 'interrupted')}); "
            f"cells not reached are errors in {matrix_path}",
            file=sys.stderr,
        )
    return EXIT_OK if matrix["exit_status"] == 0 else EXIT_FAILED


def load_instances(path: Path) -> list[tuple[str, Any]]:
    """A JSON document, or every JSON data event of an SSE transcript (`[DONE]` skipped)."""
    raw = path.read_bytes()
    text = raw.lstrip()
    if text.startswith(b"data:") or b"\ndata:" in raw[:4096]:
        parser = SSEParser()
        events = parser.feed(raw) + parser.close()
        instances = []
        for position, event in enumerate(events):
            if event.data == "[DONE]":
                continue
            instances.append(
                (f"event {position}", parse_json(event.data.encode(), what=f"event {position}"))
            )
        if parser.truncated:
            raise ConfigurationError(f"{path}: transcript ends in the middle of an event")
        return instances
    return [("body", parse_json(raw, what=str(path)))]


def command_validate(args: argparse.Namespace) -> int:
    if args.schema not in schema_names():
        raise ConfigurationError(
            f"unknown schema {args.schema!r}; expected one of: {', '.join(schema_names())}"
        )
    try:
        instances = load_instances(args.file)
    except OSError as exc:
        raise ConfigurationError(f"cannot read {args.file}: {exc.strerror}") from exc
    except (BodyNotJSON, SSEDecodeError) as exc:
        print(f"{args.file}: {exc}")
        return EXIT_FAILED
    failures = 0
    for label, instance in instances:
        result = schema_check(args.schema, instance)
        if result.passed:
            continue
        failures += 1
        print(f"{args.file} ({label}): does not conform to {args.schema}")
        for violation in result.violations:
            print(
                f"  {violation.message}\n    expected {violation.expected}; "
                f"observed {json.dumps(violation.observed)[:200]}"
            )
    if failures == 0:
        print(f"{args.file}: {len(instances)} document(s) conform to {args.schema}")
    return EXIT_FAILED if failures else EXIT_OK


def command_capabilities(_: argparse.Namespace) -> int:
    for capability in CAPABILITIES:
        support = ", ".join(
            f"{backend.value}={level.value}" for backend, level in capability.documented.items()
        )
        print(f"{capability.id:36} {capability.level.value:6} {capability.title}  [{support}]")
    return EXIT_OK


def command_kill_matrix(args: argparse.Namespace) -> int:
    import pytest

    with tempfile.TemporaryDirectory(prefix="rl-conformance-") as scratch:
        ini = Path(scratch) / "pytest.ini"
        ini.write_text("[pytest]\n")
        pytest.main(
            [
                str(suites_dir()),
                "-c",
                str(ini),
                "--rootdir",
                str(suites_dir()),
                "-p",
                "no:cacheprovider",
                "-q",
                "--no-header",
                "-rN",
                "--tb=no",
                "--rl-fault-matrix",
                "--rl-no-shrink",
                "--rl-report-dir",
                args.report_dir,
                "--rl-examples",
                str(args.examples),
                "--rl-seed",
                str(args.seed),
            ]
        )
    path = Path(args.report_dir) / "kill-matrix.json"
    if not path.exists():
        print(f"rl-conformance: no kill matrix was written ({path})", file=sys.stderr)
        return EXIT_FAILED
    kill = json.loads(path.read_text())
    print(
        f"{len(kill['faults'])} faults, unkilled: {kill['unkilled_faults'] or 'none'}; "
        f"checks killing nothing: {kill['checks_killing_nothing'] or 'none'}; "
        f"clean fakes failing: {kill['clean_failures'] or 'none'}"
    )
    print(f"written to {Path(args.report_dir) / 'kill-matrix.md'}")
    bad = kill["unkilled_faults"] or kill["checks_killing_nothing"] or kill["clean_failures"]
    return EXIT_FAILED if bad or not kill["complete"] else EXIT_OK


def command_passthrough(args: argparse.Namespace) -> int:
    from fake_backends.faults.engine import ENGINE_FAULT_NAMES

    from . import passthrough

    faults = args.engine_fault or list(ENGINE_FAULT_NAMES)
    unknown = sorted(set(faults) - set(ENGINE_FAULT_NAMES))
    if unknown:
        raise ConfigurationError(
            f"--engine-fault: unknown {unknown}; expected one of {', '.join(ENGINE_FAULT_NAMES)}"
        )
    python = Path(args.dynamo_python) if args.dynamo_python else None
    directory = Path(args.report_dir)
    try:
        report = passthrough.build_report(directory, python, faults)
    except LaunchError as exc:
        print(f"rl-conformance: {exc}", file=sys.stderr)
        return EXIT_FAILED
    passthrough.write(report, directory)
    print(passthrough.render(report))
    return EXIT_FAILED if report["holes"] else EXIT_OK


def command_install_dynamo(args: argparse.Namespace) -> int:
    try:
        python = install(args.venv, args.dynamo_version)
    except LaunchError as exc:
        print(f"rl-conformance: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"use it with: rl-conformance run --launch dynamo-mocker --dynamo-python {python}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handlers = {
        "run": command_run,
        "validate": command_validate,
        "capabilities": command_capabilities,
        "install-dynamo": command_install_dynamo,
        "kill-matrix": command_kill_matrix,
        "passthrough": command_passthrough,
    }
    try:
        return handlers[args.command](args)
    except ConfigurationError as exc:
        print(f"rl-conformance: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("rl-conformance: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
