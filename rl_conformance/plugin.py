"""The pytest plugin: options, the `capability` marker, target fixtures, result collection and
the matrix at the end of the session.

It stays inert unless the session collects tests marked with `capability` (the conformance suites),
so installing the package never changes an unrelated pytest run.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from . import capabilities as capability_registry
from . import suite_support
from .admin import AdminClient, AdminWorker, MutationPolicy, MutationRefused, RouteNotAdvertised
from .checks import REGISTRY
from .client import Client
from .errors import ConfigurationError
from .fleet import resolve_workers
from .killmatrix import build_kill_matrix, render_kill_matrix
from .matrix import Evidence, RunInfo, TestOutcome, TestRecord, build_matrix, now
from .plan import TargetPool, plan_targets
from .refresh import weight_paths
from .reports import write_reports
from .reports.markdown import render_markdown
from .target import CHANNELS, Probe, Target
from .verdict import (
    ConformanceFailure,
    FeatureAbsent,
    Inconclusive,
    NotAdvertised,
    Unobservable,
    Verdict,
)

STATE_KEY = pytest.StashKey["ConformanceRun"]()


@dataclass
class Settings:
    examples: int
    seed: int | None
    deadline_s: float
    report_dir: Path
    policy: MutationPolicy = field(default_factory=MutationPolicy)
    read_only: bool = False
    update_paths: tuple[str, ...] = ()

    def policy_for(self, target: Target) -> MutationPolicy:
        """Explicit flags win; our own fakes may be mutated unless --rl-read-only; any other
        deployment is read-only unless the user opted in."""
        if self.read_only:
            return MutationPolicy()
        if self.policy.allowed or target.kind != "fake":
            return self.policy
        return MutationPolicy(allowed=True)


def mutation_policy(option: Any) -> MutationPolicy:
    if option.rl_worker and option.rl_all_workers:
        raise ConfigurationError("--worker and --all-workers exclude each other")
    if (option.rl_worker or option.rl_all_workers) and not option.rl_allow_mutations:
        raise ConfigurationError(
            "--worker/--all-workers choose targets for mutating calls: add --allow-mutations"
        )
    if option.rl_allow_mutations and not (option.rl_worker or option.rl_all_workers):
        raise ConfigurationError(
            "--allow-mutations needs --worker INSTANCE_ID (repeatable) or --all-workers"
        )
    if option.rl_allow_mutations and option.rl_read_only:
        raise ConfigurationError("--allow-mutations and --read-only exclude each other")
    if not option.rl_allow_mutations:
        return MutationPolicy()
    workers = None if option.rl_all_workers else frozenset(option.rl_worker)
    return MutationPolicy(allowed=True, workers=workers)


@dataclass
class ConformanceRun:
    settings: Settings
    pool: TargetPool
    capability_ids: list[str]
    records: list[TestRecord]
    active: bool = False
    started_at: Any = None
    client: Client | None = None
    timer: threading.Timer | None = None
    incomplete_reason: str | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rl-conformance", "Dynamo RL serving-contract conformance")
    group.addoption(
        "--rl-fake",
        action="append",
        default=None,
        metavar="BACKEND",
        help="test one of our fake deployments (vllm, sglang, trtllm); repeatable. "
        "Default: all three, unless --rl-frontend is given.",
    )
    group.addoption("--rl-frontend", default=None, metavar="URL", help="external frontend URL")
    group.addoption("--rl-url", default=None, metavar="URL", help="external RL listener URL")
    group.addoption("--rl-backend", default=None, help="backend of the external deployment")
    group.addoption("--rl-model", default=None, help="model to request (default: the one listed)")
    group.addoption(
        "--rl-fault",
        action="append",
        default=[],
        metavar="NAME",
        help="start the fakes with this fault (repeatable)",
    )
    group.addoption("--rl-workers", type=int, default=2, help="RL workers per fake vLLM deployment")
    group.addoption(
        "--rl-capability",
        action="append",
        default=None,
        metavar="ID",
        help="run only these capabilities (repeatable)",
    )
    group.addoption(
        "--rl-examples",
        type=int,
        default=8,
        help="hypothesis examples per property test (default 8)",
    )
    group.addoption("--rl-seed", type=int, default=0, help="seed for generated requests")
    group.addoption(
        "--rl-deadline",
        type=float,
        default=30.0,
        help="deadline in seconds for every request (default 30)",
    )
    group.addoption(
        "--rl-launch",
        default=None,
        metavar="KIND",
        help="launch a deployment: dynamo-mocker, dynamo-fake-vllm or docker",
    )
    group.addoption(
        "--rl-docker-config",
        default=None,
        metavar="FILE",
        help="deployment config for --rl-launch docker",
    )
    group.addoption(
        "--rl-engine-fault",
        action="append",
        default=[],
        metavar="NAME",
        help="engine fault for --rl-launch dynamo-fake-vllm (repeatable)",
    )
    group.addoption(
        "--rl-dynamo-python",
        default=None,
        metavar="PATH",
        help="python of a virtual environment with ai-dynamo",
    )
    group.addoption(
        "--rl-allow-mutations",
        action="store_true",
        help="allow mutating admin calls (pause, update, flush...) on chosen workers",
    )
    group.addoption(
        "--rl-worker",
        action="append",
        default=[],
        type=int,
        metavar="INSTANCE_ID",
        help="a worker that mutating calls may target (repeatable)",
    )
    group.addoption(
        "--rl-all-workers",
        action="store_true",
        help="mutating calls may target every advertised worker",
    )
    group.addoption(
        "--rl-update-model-path",
        action="append",
        default=[],
        metavar="PATH",
        help="checkpoint path for weight-update tests on a real engine (give two; they alternate)",
    )
    group.addoption(
        "--rl-no-shrink",
        action="store_true",
        help="report the first failing example without shrinking it (faster on failures)",
    )
    group.addoption(
        "--rl-fault-matrix",
        action="store_true",
        help="one fake per named fault plus clean fakes; writes kill-matrix.md/.json",
    )
    group.addoption(
        "--rl-read-only",
        action="store_true",
        help="no mutating call to any target, our fakes included",
    )
    group.addoption(
        "--rl-worker-url",
        action="append",
        default=[],
        metavar="URL",
        help="system URL of a worker that discovery does not list (SGLang, TensorRT-LLM); "
        "repeatable; needs --rl-frontend",
    )
    group.addoption(
        "--rl-run-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop the whole run after this many seconds; the matrix is written, incomplete",
    )
    group.addoption(
        "--rl-report-dir",
        default="conformance-report",
        metavar="DIR",
        help="where matrix.json, matrix.md, junit.xml and matrix.html go",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "capability(id): the conformance capability a test certifies"
    )
    config.addinivalue_line(
        "markers", "needs(*channels): fake-only channels the test reaches through the probe"
    )
    config.addinivalue_line(
        "markers",
        "mutating: changes deployment state; runs after every read-only test of its "
        "target so that no state leaks into unrelated capabilities",
    )
    option = config.option
    selected = option.rl_capability
    if selected:
        unknown = sorted(set(selected) - set(capability_registry.BY_ID))
        if unknown:
            raise pytest.UsageError(
                f"--rl-capability: unknown capability id(s) {unknown}; "
                f"known: {sorted(capability_registry.BY_ID)}"
            )
    try:
        pool = plan_targets(
            fakes=option.rl_fake,
            frontend=option.rl_frontend,
            rl_url=option.rl_url,
            backend=option.rl_backend,
            model=option.rl_model,
            worker_urls=option.rl_worker_url,
            faults=option.rl_fault,
            workers=option.rl_workers,
            launch=option.rl_launch,
            docker_config=option.rl_docker_config,
            engine_faults=option.rl_engine_fault,
            dynamo_python=option.rl_dynamo_python,
            logs_dir=Path(option.rl_report_dir) / "logs",
            fault_matrix=option.rl_fault_matrix,
        )
        policy = mutation_policy(option)
    except ConfigurationError as exc:
        raise pytest.UsageError(str(exc)) from exc
    suite_support.configure(option.rl_examples, option.rl_seed, shrink=not option.rl_no_shrink)
    settings = Settings(
        examples=option.rl_examples,
        seed=option.rl_seed,
        deadline_s=option.rl_deadline,
        report_dir=Path(option.rl_report_dir),
        policy=policy,
        read_only=option.rl_read_only,
        update_paths=tuple(option.rl_update_model_path),
    )
    ids = selected or [capability.id for capability in capability_registry.CAPABILITIES]
    config.stash[STATE_KEY] = ConformanceRun(
        settings=settings, pool=pool, capability_ids=ids, records=[]
    )


def _run(config: pytest.Config) -> ConformanceRun:
    return config.stash[STATE_KEY]


def capabilities_of(item: pytest.Item) -> tuple[str, ...]:
    return tuple(mark.args[0] for mark in item.iter_markers("capability") if mark.args)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "target" in metafunc.fixturenames:
        ids = _run(metafunc.config).pool.ids
        metafunc.parametrize("target", ids, ids=ids, indirect=True, scope="session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run = _run(config)
    wanted = set(run.capability_ids)
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        marked = capabilities_of(item)
        if marked:
            for capability_id in marked:
                if capability_id not in capability_registry.BY_ID:
                    raise pytest.UsageError(f"{item.nodeid}: unknown capability {capability_id!r}")
            (keep if wanted & set(marked) else drop).append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    order = {target_id: index for index, target_id in enumerate(run.pool.ids)}
    items.sort(
        key=lambda item: (
            order.get(_target_of(item), -1),
            item.get_closest_marker("mutating") is not None,
        )
    )
    if any(capabilities_of(item) for item in items):
        run.active = True
        run.started_at = now()
        _install_sigterm()
        timeout = config.option.rl_run_timeout
        if timeout is not None:
            run.timer = _start_run_timer(run, timeout)


def _target_of(item: pytest.Item) -> str:
    return str(getattr(getattr(item, "callspec", None), "params", {}).get("target", ""))


def _start_run_timer(run: ConformanceRun, seconds: float) -> threading.Timer | None:
    """SIGINT to the main thread after `seconds`: whatever it waits on (a request, a launch)
    is interrupted as by Ctrl-C, and the matrix is still written, marked incomplete."""
    if threading.current_thread() is not threading.main_thread():
        return None
    main = threading.main_thread().ident
    assert main is not None

    def expire() -> None:
        run.incomplete_reason = f"--run-timeout: the run was stopped after {seconds:g} s"
        signal.pthread_kill(main, signal.SIGINT)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def _install_sigterm() -> None:
    """SIGTERM ends the run like Ctrl-C does, so the report is still written (marked incomplete)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


@pytest.fixture(scope="session")
def conformance_settings(request: pytest.FixtureRequest) -> Settings:
    return _run(request.config).settings


@pytest.fixture(scope="session")
def client(request: pytest.FixtureRequest) -> Iterator[Client]:
    run = _run(request.config)
    if run.client is None:
        run.client = Client(deadline_s=run.settings.deadline_s)
    yield run.client


@pytest.fixture(scope="session")
def target(request: pytest.FixtureRequest, client: Client) -> Target:
    return _run(request.config).pool.get(request.param, client)


@pytest.fixture
def verdict() -> Verdict:
    return Verdict()


@pytest.fixture
def admin(request: pytest.FixtureRequest, client: Client, target: Target) -> AdminClient:
    """Administrative calls under this run's mutation policy for the target."""
    return AdminClient(client, _run(request.config).settings.policy_for(target))


@pytest.fixture
def probe(request: pytest.FixtureRequest, target: Target) -> Probe:
    """The target's fake-only channels, for tests that declare them with `needs(...)`: a test
    cannot lean on a launcher's private knowledge without saying so, and on a target that lacks
    a declared channel it is skipped with the channel named."""
    marker = request.node.get_closest_marker("needs")
    needed = set(marker.args) if marker else set()
    if not needed:
        raise pytest.UsageError(
            f"{request.node.nodeid} uses the probe without declaring @pytest.mark.needs(...)"
        )
    missing = sorted(needed - target.offers)
    if missing or target.probe is None:
        raise Unobservable("; ".join(f"needs {name}: {CHANNELS[name]}" for name in missing))
    return target.probe


@pytest.fixture
def update_model_path(request: pytest.FixtureRequest, target: Target) -> Any:
    """A function version -> model_path for weight updates. It refuses when called, not at
    setup, so a test first reports what it can observe without mutating (an absent feature)."""
    settings = _run(request.config).settings
    policy = settings.policy_for(target)
    paths = weight_paths(target, settings.update_paths)
    counter = _UPDATE_COUNTERS.setdefault(target.id, itertools.count())

    def choose(version: str) -> str | None:
        if not policy.allowed:
            raise MutationRefused(f"{policy.describe()}: weight updates not sent")
        if paths is None:
            pytest.skip(
                "weight updates on this deployment need real checkpoints: give "
                "--update-model-path PATH twice"
            )
        return paths[next(counter) % len(paths)] if paths else None

    return choose


_UPDATE_COUNTERS: dict[str, itertools.count[int]] = {}


@pytest.fixture
def admin_workers(client: Client, target: Target) -> list[AdminWorker]:
    """Workers to observe and administer: discovery's, plus the worker URLs given for workers
    discovery does not list (see `fleet.resolve_workers`)."""
    return resolve_workers(client, target)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Stop a deployment as soon as its last test ran (after that test's own finalizers): a run
    over many targets (the kill matrix starts one fake per fault) then holds one deployment at a
    time, not all of them."""
    yield
    current = _target_of(item)
    if current and (nextitem is None or _target_of(nextitem) != current):
        run = _run(item.config)
        run.pool.release(current, run.client)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    assert outcome is not None
    report: pytest.TestReport = outcome.get_result()
    marked = capabilities_of(item)
    if not marked or not _run(item.config).active:
        return
    if call.when == "call" or (call.when == "setup" and not report.passed):
        record = _record(item, call, report, marked)
        _run(item.config).records.append(record)
        if (
            record.outcome in (TestOutcome.ABSENT, TestOutcome.NOT_ADVERTISED, TestOutcome.SKIPPED)
            and not report.skipped
        ):
            report.outcome = "skipped"
            report.longrepr = (
                str(item.path),
                item.location[1] or 0,
                f"{record.outcome.value}: {record.reason}",
            )


def _record(
    item: pytest.Item,
    call: pytest.CallInfo[None],
    report: pytest.TestReport,
    marked: tuple[str, ...],
) -> TestRecord:
    target_id = getattr(getattr(item, "callspec", None), "params", {}).get("target", "?")
    record = TestRecord(
        nodeid=item.nodeid,
        capabilities=marked,
        target_id=target_id,
        outcome=TestOutcome.PASSED,
        duration_s=call.duration,
    )
    verdict = getattr(item, "funcargs", {}).get("verdict")
    if isinstance(verdict, Verdict):
        record.checks = [(result.check_id, result.passed) for result, _ in verdict.results]
    if report.passed:
        return record
    excinfo = call.excinfo
    error = _find(excinfo.value if excinfo else None)
    if report.skipped and not isinstance(error, FeatureAbsent | NotAdvertised | Inconclusive):
        record.outcome = TestOutcome.SKIPPED
        record.reason = _skip_reason(report)
    elif isinstance(error, FeatureAbsent):
        record.outcome, record.reason = TestOutcome.ABSENT, str(error)
    elif isinstance(error, NotAdvertised | RouteNotAdvertised):
        record.outcome, record.reason = TestOutcome.NOT_ADVERTISED, str(error)
    elif isinstance(error, MutationRefused | Inconclusive):
        record.outcome, record.reason = TestOutcome.SKIPPED, str(error)
    elif isinstance(error, ConformanceFailure) and call.when == "call":
        record.outcome = TestOutcome.FAILED
        result = error.result
        record.reason = result.violations[0].message if result.violations else result.spec.title
        reproducer = error.exchange.curl() if error.exchange is not None else None
        record.evidence = [
            Evidence(
                result.check_id,
                violation.message,
                violation.field,
                violation.expected,
                violation.observed,
                reproducer,
            )
            for violation in result.violations
        ]
        record.checks.append((result.check_id, False))
    elif isinstance(error, AssertionError) and call.when == "call":
        record.outcome = TestOutcome.FAILED
        record.reason = str(error).splitlines()[0] if str(error) else "assertion failed"
    else:
        record.outcome = TestOutcome.ERROR
        name = type(error).__name__ if error is not None else "error"
        record.reason = f"{call.when}: {name}: {error}"
    return record


def _find(error: BaseException | None) -> BaseException | None:
    """The most telling exception, looking inside hypothesis' exception groups."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _find(inner)
            if isinstance(
                found,
                ConformanceFailure
                | FeatureAbsent
                | NotAdvertised
                | RouteNotAdvertised
                | MutationRefused
                | Inconclusive,
            ):
                return found
        return _find(error.exceptions[0]) if error.exceptions else error
    return error


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After the runner tore down every fixture (even on an interrupt): fixtures that restore
    a deployment's state must find it still running."""
    run = _run(session.config)
    if not run.active:
        return
    if run.timer is not None:
        run.timer.cancel()
    try:
        complete = exitstatus != pytest.ExitCode.INTERRUPTED and not session.shouldstop
        reason = None if complete else run.incomplete_reason or "the run was interrupted"
        info = RunInfo(
            started_at=run.started_at or now(),
            finished_at=now(),
            complete=complete,
            seed=run.settings.seed,
            incomplete_reason=reason,
        )
        selected = [capability_registry.get(capability_id) for capability_id in run.capability_ids]
        matrix = build_matrix(selected, run.pool.planned_targets(), run.records, info)
        write_reports(matrix, run.settings.report_dir)
        if session.config.option.rl_fault_matrix:
            kill = build_kill_matrix(matrix, REGISTRY)
            directory = run.settings.report_dir
            (directory / "kill-matrix.json").write_text(json.dumps(kill, indent=2) + "\n")
            (directory / "kill-matrix.md").write_text(render_kill_matrix(kill))
        session.config.stash[MATRIX_KEY] = matrix
        if matrix["exit_status"] != 0 and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    finally:
        _shutdown(run)


MATRIX_KEY = pytest.StashKey[dict]()


def _shutdown(run: ConformanceRun) -> None:
    run.pool.stop_all()
    if run.client is not None:
        run.client.close()
        run.client = None


def pytest_unconfigure(config: pytest.Config) -> None:
    if STATE_KEY in config.stash:
        _shutdown(_run(config))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    matrix = config.stash.get(MATRIX_KEY, None)
    if matrix is None:
        return
    terminalreporter.section("conformance matrix")
    for line in render_markdown(matrix).splitlines():
        if line.startswith("## Cells that did not pass"):
            break
        terminalreporter.write_line(line)
    failing = [
        (row["id"], target, cell)
        for row in matrix["capabilities"]
        for target, cell in row["cells"].items()
        if cell["outcome"] in ("fail", "error")
    ]
    for capability_id, target, cell in failing[:FAILURES_SHOWN]:
        reason = " ".join(cell["reason"].split())
        terminalreporter.write_line(
            f"{cell['outcome'].upper()} {capability_id} on {target}: {reason[:240]}"
        )
    if len(failing) > FAILURES_SHOWN:
        terminalreporter.write_line(f"... and {len(failing) - FAILURES_SHOWN} more in matrix.md")
    terminalreporter.write_line(
        f"reports written to {os.path.abspath(_run(config).settings.report_dir)}"
    )


FAILURES_SHOWN = 20
