"""`ConformanceRun`: the pytest plugin object of one run, from configuration to the matrix.

Configure plans the targets (launchers are created, not started), loads the run's hypothesis
profile (examples, shrinking) and seed, and keeps the run's state on `config.stash`. At the end
the records become the matrix, written even when the run was interrupted (marked incomplete),
then every launcher stops what it started.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..checks.base import rule_ids
from ..control.fleet_restore import WorkerRestore
from ..launchers.run_plan import RunPlan
from ..model import capabilities as capability_registry
from ..model import exits, stops
from ..model.journal import Journal
from ..model.killmatrix import build_kill_matrix, write_kill_matrix
from ..model.matrix import Matrix, RunInfo, TestRecord, build_matrix, now
from ..model.target import Target
from ..reports import console, evidence, write_reports
from ..wire.exchange import Exchange
from . import budgeting, crash_probes, deaths, distribution, fixtures, fleet_record, forked, reruns
from .collection import (
    capabilities_of,
    ends_worker_reason,
    parametrize_targets,
    select_and_order,
    target_of,
)
from .forked_run import ForkedRun
from .hypothesis_profile import (
    hypothesis_home_in,
    load_hypothesis_profile,
    restore_hypothesis_home,
    restore_local_constants,
    without_local_constants,
)
from .recording import record_of, show_as_skipped, status_of_call, verify_reproducers
from .restore import end_of_run, fleet_restored_here, not_restored_warnings
from .run_stops import install_stop_signals, start_run_timer, timeout_reason
from .state import STATE, RunState, state_of
from .state import shutdown as _shutdown

GRACE_S = 5.0
MARKERS = (
    "capability(id): the conformance capability a test certifies",
    "needs(*channels): fake-only channels the test reaches through rl_probe",
    "mutating: changes deployment state; runs after every read-only test of its target so "
    "that no state leaks into unrelated capabilities",
    "may_end_worker(reason): may end the worker it is sent to; runs after every other test of "
    "its target, is named before the first test, and --skip-crash-probes leaves it out",
)


class ConformanceRun(ForkedRun):
    NAME = "rl-conformance-run"

    def __init__(self, plan: RunPlan, progress: bool = False, jobs: int = 1) -> None:
        self.plan = plan
        self.config = plan.config
        self.jobs = jobs
        """Targets tested at once by forked children (`forked`); 1 runs in this process."""
        self._send: Any = None
        self._session: pytest.Session | None = None
        self.matrix: Matrix | None = None
        """The run's matrix once the session finished (also written to the report files)."""
        self.bundle_sha256: str | None = None
        self.progress = progress
        """Print a progress line whenever the run moves to another target or contract area."""
        self._order: dict[str, tuple[int, str, str]] = {}
        self._shown: tuple[str, str] | None = None
        self._tapes: dict[str, deque[Exchange] | None] = {}
        """Each test's tape of its exchanges (`Client.new_tape`), started at its setup."""
        self._deadline: float | None = None
        """The run's end as a wall-clock time (`--run-timeout`), handed to parallel workers."""
        self._total = 0
        self._received = 0
        self._areas_shown: set[tuple[str, str]] = set()
        self._worker_targets: dict[str, Target] = {}
        self._targets_sent: list[dict[str, Any]] = []
        """What a forked child last told the parent of the targets it reached."""
        self._nodes: list[Any] = []
        self._spent_marks: dict[str, int] = {}
        self._ledger_marks: dict[str, int] = {}
        self._reruns = reruns.Reruns()
        """Tests run again because they met a worker dying of an earlier test's call."""
        self._journal: Journal | None = None
        """`records.jsonl` in the report directory: each record as its test finishes, kept by
        the process that folds the records (never a parallel run's worker)."""
        self._hypothesis_home: tuple[bool, Any] = (False, None)
        self._local_constants: Any = None
        self._restore_signals: Callable[[], None] | None = None
        self.restore_lines: list[str] = []
        """The fleet as the run leaves it, and a stopped run's held workers (`restore`)."""

    # -- configuration -------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        self._config = config
        for line in MARKERS:
            config.addinivalue_line("markers", line)
        run = self.config
        config.stash[STATE] = RunState(run=self.plan)
        load_hypothesis_profile(run)
        self._hypothesis_home = hypothesis_home_in(run.report_path)
        self._local_constants = without_local_constants()
        if run.run_timeout is not None:
            self._deadline = time.time() + run.run_timeout
        if getattr(config.option, "hypothesis_seed", None) is None:
            config.option.hypothesis_seed = str(run.seed)
        config.pluginmanager.register(fixtures, f"{self.NAME}-fixtures")
        config.pluginmanager.register(budgeting, f"{self.NAME}-budget")
        config.pluginmanager.register(crash_probes, f"{self.NAME}-crash-probes")
        config.pluginmanager.register(fleet_record, f"{self.NAME}-fleet-record")

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        parametrize_targets(metafunc, state_of(metafunc.config).pool.ids)

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        state = state_of(config)
        wanted = set(self.config.capability or capability_registry.BY_ID)
        select_and_order(config, items, wanted, state.pool.ids)
        crash_probes.announce(config, items)
        state.plan = budgeting.plan(items, self.plan)
        if self.config.dry_run:
            config.hook.pytest_deselected(items=list(items))
            items[:] = []
            return
        if self.config.skip_crash_probes:
            crash_probes.leave_out(items)
        budgeting.prepare(items, state.plan, self.config.budget_generations)
        self._order = {
            item.nodeid: (position, target_of(item) or "?", _area(item))
            for position, item in enumerate(items)
        }
        if any(capabilities_of(item) for item in items):
            self._activate(state, distribution.seconds_left(config) or self.config.run_timeout)

    def _activate(self, state: RunState, run_timeout: float | None) -> None:
        state.active = True
        state.started_at = now()
        self._restore_signals = install_stop_signals(state)
        if run_timeout is not None:
            state.timer = start_run_timer(state, run_timeout)
        if not distribution.is_worker(self._config):
            self._journal = Journal.begin(
                self.config.report_path,
                self._run_info(state, complete=False),
                self.config.capability or capability_registry.BY_ID,
                state.pool.planned_targets(),
            )

    def _run_info(self, state: RunState, complete: bool) -> RunInfo:
        return RunInfo(
            started_at=state.started_at or now(),
            finished_at=now(),
            complete=complete,
            seed=self.config.seed,
            budget_generations=self.config.budget_generations,
            recorded=self.config.recorded(),
            warnings=(*not_restored_warnings(state), *state.run.network.warnings()),
            incomplete_reason=None
            if complete
            else state.incomplete_reason or "the run was interrupted",
        )

    def _add_record(self, state: RunState, record: TestRecord) -> None:
        """Keep a test's record (in place of an earlier one of the same test and target, which
        it amends), and append it to the journal at once (its target first, as reached so far)."""
        kept = next(
            (
                position
                for position, found in enumerate(state.records)
                if found.nodeid == record.nodeid and found.target_id == record.target_id
            ),
            None,
        )
        if kept is None:
            state.records.append(record)
        else:
            state.records[kept] = record
        if self._journal is not None:
            self._journal_target(state, record.target_id)
            self._journal.record(record)

    def _journal_target(self, state: RunState, target_id: str) -> None:
        if self._journal is None:
            return
        target = self._worker_targets.get(target_id) or next(
            (t for t in state.pool.planned_targets() if t.id == target_id), None
        )
        if target is not None:
            self._journal.target(target)

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        if self._nodes:
            distribution.interrupt_workers(self._nodes)
        config = getattr(self, "_config", None)
        if config is None or STATE not in config.stash:
            return
        state = state_of(config)
        if excinfo.type is not KeyboardInterrupt:  # pytest's own stop (collection errors)
            state.incomplete_reason = state.incomplete_reason or str(excinfo.value)
            return
        state.incomplete_reason = state.incomplete_reason or exits.SIGINT_REASON
        reporter = self._reporter
        if reporter is not None:
            # A stop, not a crash: its one line is the run's own (the incomplete matrix, its
            # reason and exit status), not pytest's interrupt banner and the frame it hit.
            with contextlib.suppress(AttributeError, TypeError):
                reporter._report_keyboardinterrupt = lambda: None

    # -- a parallel run's controller ------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        return distribution.make_scheduler(config, log, state_of(config).pool.ids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        distribution.hand_over_deadline(node, self._deadline)
        self._nodes.append(node)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        state = state_of(self._config)
        if state.active or not ids:
            return
        self._total = len(ids)
        # The workers stop themselves at the deadline; this is the net if one cannot.
        grace = None if self._deadline is None else self._deadline - time.time() + GRACE_S
        self._activate(state, grace)
        config = self._config
        width = crash_probes.console_width(config)
        reporter = self._reporter
        for line in crash_probes.announcement_of_ids(config, ids, width) if reporter else []:
            reporter.write_line(line)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self._send is not None:
            self._send_reached_targets()
            self._send({"kind": "report", "report": forked.serialised(self._config, report)})
            return
        if not distribution.is_controller(self._config):
            return
        found = distribution.records_in(report)
        self._received += report.when == "call" or (report.when == "setup" and not report.passed)
        if not found:
            return
        for amended, _ in found[1:]:
            self._add_record(state_of(self._config), amended)
        record, area = found[0]
        self._add_record(state_of(self._config), record)
        if self.progress and (record.target_id, area) not in self._areas_shown:
            self._areas_shown.add((record.target_id, area))
            reporter = self._reporter
            if reporter is not None:
                width = len(str(self._total))
                reporter.write("\n")
                reporter.write_line(
                    f"[{self._received:>{width}}/{self._total}] {record.target_id}: {area}"
                )

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        state_of(self._config).fleet_restore += [
            WorkerRestore.from_json(document) for document in distribution.restores_reported(node)
        ]
        for target in distribution.targets_reported(node):
            self._worker_targets[target.id] = target
            self._journal_target(state_of(self._config), target.id)

    # -- while tests run -------------------------------------------------------------------

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        state = state_of(item.config)
        state.current_target = target_of(item)
        client = state.client
        if client is not None:
            state.aim(client)
            state.new_attempt_identity()
        # without a client yet, the test's tape is the one the client starts when it is made
        self._tapes[item.nodeid] = client.new_tape() if client is not None else None
        self._spent_marks[item.nodeid] = client.spent(state.current_target) if client else 0
        self._ledger_marks[item.nodeid] = len(state.ledger.history)
        if (dead := deaths.not_run(state, state.current_target)) is not None:
            pytest.skip(dead)

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        found = self._order.get(nodeid)
        if not self.progress or found is None:
            return
        position, target, area = found
        if (target, area) == self._shown:
            return
        self._shown = (target, area)
        reporter = self._reporter
        if reporter is not None:
            total = len(self._order)
            if position:
                reporter.write("\n")  # after the previous area's progress dots
            reporter.write_line(f"[{position:>{len(str(total))}}/{total}] {target}: {area}")

    @property
    def _reporter(self) -> Any:
        config = getattr(self, "_config", None)
        return None if config is None else config.pluginmanager.get_plugin("terminalreporter")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool:
        return reruns.run_protocol(item, nextitem, self._reruns)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Iterator[None]:
        """Stop a deployment as soon as its last test ran (after that test's own finalizers):
        a run over many targets (the kill matrix) holds one deployment at a time."""
        yield
        self._tapes.pop(item.nodeid, None)
        current = target_of(item)
        if item.nodeid in self._reruns.wanted:
            return  # the test runs again on this deployment
        if current and (nextitem is None or target_of(nextitem) != current):
            state = state_of(item.config)
            state.pool.release(current, state.client)
            self._journal_target(state, current)  # with what its release noted

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Iterator[None]:
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        marked = capabilities_of(item)
        state = state_of(item.config)
        if not marked or not state.active:
            return
        if call.when == "call" or (call.when == "setup" and not report.passed):
            tape = self._tapes.pop(item.nodeid, ())
            exchanges = list(state.client.log if tape is None and state.client else tape or ())
            record = record_of(item, call, report, marked, exchanges)
            if state.client is not None:
                spent = state.client.spent(record.target_id)
                # a test skipped before its setup ran (a skip mark) sent nothing
                record.generations = spent - self._spent_marks.get(item.nodeid, spent)
            carried = self._reruns.carried(item.nodeid)
            if carried is not None:
                record.measured["ran_again"] = (
                    f"its first run met the worker dying of a call of {carried.nodeid}"
                )
            target = getattr(item, "funcargs", {}).get("rl_target")
            mark = self._ledger_marks.get(item.nodeid, len(state.ledger.history))
            may_end = ends_worker_reason(item) is not None
            watch_s = deaths.watch_for(target, record, may_end)
            amended = deaths.after_test(state, target, record, mark, exchanges, watch_s)
            if self.config.verify_reproducers and record.evidence:
                verify_reproducers([record])  # at once: later tests change the deployment
            self._add_record(state, record)
            if amended is not None:
                self._add_record(state, amended)
                self._reruns.consider(record, amended)
            amended = amended or carried
            show_as_skipped(item, report, record)
            if distribution.is_worker(item.config):
                distribution.attach_record(report, record, _area(item))
                if amended is not None:
                    distribution.attach_record(report, amended, "")

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, str] | None:
        """A call the matrix calls an error, pytest counts as one too."""
        return status_of_call(report)

    # -- the end ---------------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """After the runner tore down every fixture (even on an interrupt): fixtures that
        restore a deployment's state must find it still running. A stop signal meanwhile is
        noted, not raised (`model.stops`): the reports are written whole."""
        with stops.ending():
            self._finish(session, exitstatus)

    def _finish(self, session: pytest.Session, exitstatus: int) -> None:
        state = state_of(session.config)
        if self.config.dry_run:
            budgeting.write_plan(state, self.config)
            _shutdown(state)
            return
        if not state.active:
            return
        if state.timer is not None:
            state.timer.cancel()
        if distribution.is_worker(session.config):
            try:
                if state.fleet_found:
                    restores = fleet_restored_here(state)
                    distribution.publish_restores(session.config, restores)
                distribution.publish_targets(session.config, state.pool.reached_targets())
            finally:
                _shutdown(state)
            return
        try:
            complete = (
                exitstatus != pytest.ExitCode.INTERRUPTED
                and not session.shouldstop
                and stops.received() is None
            )
            if not complete and self._deadline is not None and time.time() >= self._deadline:
                state.incomplete_reason = state.incomplete_reason or timeout_reason(
                    self.config.run_timeout
                )
            self.restore_lines = end_of_run(state, complete)
            info = self._run_info(state, complete)
            selected = [
                capability_registry.get(capability_id)
                for capability_id in self.config.capability or capability_registry.BY_ID
            ]
            targets = [
                self._worker_targets.get(target.id, target)
                for target in state.pool.planned_targets()
            ]
            matrix = build_matrix(selected, targets, state.records, info)
            matrix.fleet_restore = [result.to_json() for result in state.fleet_restore]
            document = matrix.to_json()
            write_reports(document, self.config.report_path)
            if self.config.fault_matrix:
                kill = build_kill_matrix(document, rule_ids())
                write_kill_matrix(kill, self.config.report_path)
            if self._journal is not None:
                self._journal.end(info)
            state.matrix = self.matrix = matrix
            if matrix.exit_status != 0 and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            if not self.config.fault_matrix:
                evidence.write_records(
                    self.config.report_path, document, self.config.record_meta_document()
                )
        finally:
            self._close_journal()
            _shutdown(state)
        if self.matrix is not None and not self.config.fault_matrix:
            # Last, once every launcher stopped: their logs are part of the bundle.
            self.bundle_sha256 = evidence.seal(self.config.report_path, self.config.artifact_bundle)

    def _close_journal(self) -> None:
        journal, self._journal = self._journal, None
        if journal is not None:
            journal.close()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._restore_signals is not None:
            self._restore_signals()
            self._restore_signals = None
        self._close_journal()
        restore_hypothesis_home(self._hypothesis_home)
        restore_local_constants(self._local_constants)
        if STATE in config.stash:
            _shutdown(state_of(config))

    def pytest_terminal_summary(
        self, terminalreporter: Any, exitstatus: int, config: pytest.Config
    ) -> None:
        if self.config.dry_run:
            budgeting.show_plan(terminalreporter, state_of(config), self.config)
            return
        found = state_of(config).matrix
        if found is None:
            return
        terminalreporter.section("conformance matrix")
        lines = console.summary_lines(
            found.to_json(),
            report_dir=Path(self.config.report_path),
            width=terminalreporter._tw.fullwidth,
            bundle_sha256=self.bundle_sha256,
            terminal=bool(getattr(terminalreporter, "isatty", True)),
            annotate=console.in_github_actions(),
        )
        for line in [*self.restore_lines, *lines]:
            terminalreporter.write_line(line)


def _area(item: pytest.Item) -> str:
    """The contract area of a test: its capability's area, else its suite module."""
    for capability_id in capabilities_of(item):
        capability = capability_registry.BY_ID.get(capability_id)
        if capability is not None:
            return capability.area
    return item.path.stem.removeprefix("test_")
