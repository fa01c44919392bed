"""A forked parallel run (`--jobs N` where pytest-xdist does not distribute the run): one forked
child per group of a target's tests, each reporting to the parent, which journals the targets
and folds the reports as a serial run would. The `ConformanceRun` plugin's hooks for it, mixed
into the plugin (they share its state); `forked` is the mechanism."""

from __future__ import annotations

import contextlib
import signal
from typing import TYPE_CHECKING, Any

import pytest

from ..control.fleet_restore import WORKER_RESTORE_S, WorkerRestore
from ..model.target import Target
from . import balance, distribution, forked
from .restore import fleet_restored_here
from .state import shutdown as _shutdown
from .state import state_of

if TYPE_CHECKING:
    from ..launchers.run_plan import RunPlan
    from ..model.journal import Journal
    from .state import RunState


class ForkedRun:
    """The hooks and messages of a forked parallel run."""

    if TYPE_CHECKING:
        plan: RunPlan
        jobs: int
        progress: bool
        _config: pytest.Config
        _session: pytest.Session | None
        _total: int
        _send: Any
        _journal: Journal | None
        _targets_sent: list[dict[str, Any]]
        _worker_targets: dict[str, Target]

        def _journal_target(self, state: RunState, target_id: str) -> None: ...

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        """With `jobs` > 1, one forked child per target runs that target's tests (several, each
        on a deployment of its own, for a target cheap to start again: `balance`)."""
        groups = balance.balanced_groups(session.items, self.plan.split_targets())
        config = session.config
        if (
            self.jobs < 2
            or len(groups) < 2
            or not forked.available()
            or session.testsfailed  # collection errors: pytest's own loop reports them
            or config.option.collectonly
            or distribution.is_worker(config)
            or distribution.is_controller(config)
        ):
            return None
        config.stash[forked.FORK_PARENT] = True
        self._session = session
        self._total = len(session.items)
        with contextlib.ExitStack() as stack:
            self.plan.pool.prepare(stack)
            forked.run_children(
                groups,
                self.jobs,
                lambda items, send: self._run_child(session, items, send),
                self._receive,
            )
        return True

    def _run_child(self, session: pytest.Session, items: list[pytest.Item], send: Any) -> None:
        config = session.config
        config.stash[forked.FORKED_CHILD] = True
        self.progress, self._send = False, send
        forked.silence_terminal(config)
        forked.restart_capture(config)
        if self._journal is not None:
            self._journal.detach()  # the parent journals what this child reports
            self._journal = None
        state = state_of(config)
        state.timer = None  # the parent's timer thread did not cross the fork
        try:
            forked.run_items(session, items)
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # clean up before anything else
            send({"kind": "interrupted"})
            with contextlib.suppress(Exception):
                session._setupstate.teardown_exact(None)
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                self._restore_child_fleet(state, send)
                reached = [target.describe() for target in state.pool.reached_targets()]
                send({"kind": "targets", "targets": reached})
            finally:
                _shutdown(state)

    @staticmethod
    def _restore_child_fleet(state: RunState, send: Any) -> None:
        """The workers this child changed, put back before it exits (it alone holds what it
        found and did), and the result sent to the parent, which reports it with its own.
        The parent is told first how many are being put back: a reload takes longer than an
        interrupted child is otherwise given."""
        workers = sum(len(found) for found in state.fleet_found.values())
        if not workers:
            return
        send({"kind": "restoring", "workers": workers, "grace_s": workers * WORKER_RESTORE_S})
        send({"kind": "restored", "results": fleet_restored_here(state)})

    def _send_reached_targets(self) -> None:
        """A child tells the parent of each target it reached as soon as it did, before that
        target's first report: a run killed midway leaves them journaled as they were reached."""
        reached = [target.describe() for target in state_of(self._config).pool.reached_targets()]
        if reached != self._targets_sent:
            self._targets_sent = reached
            self._send({"kind": "targets", "targets": reached})

    def _receive(self, message: dict[str, Any]) -> None:
        config = self._config
        if message["kind"] == "report":
            report = forked.replayed(config, message["report"])
            config.hook.pytest_runtest_logreport(report=report)
        elif message["kind"] == "targets":
            for document in message["targets"]:
                target = Target.from_description(document)
                self._worker_targets[target.id] = target
                self._journal_target(state_of(config), target.id)
        elif message["kind"] == "restored":
            state = state_of(config)
            state.fleet_restore += [WorkerRestore.from_json(item) for item in message["results"]]
        elif message["kind"] in ("interrupted", "crashed"):
            why = (
                "a target's tests were interrupted"
                if message["kind"] == "interrupted"
                else f"the process testing a target exited with code {message.get('code')}"
            )
            state = state_of(config)
            state.incomplete_reason = state.incomplete_reason or why
            if self._session is not None:
                self._session.shouldstop = why
