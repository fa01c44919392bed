"""A worker that dies is a finding of the test whose call killed it.

After a test that sent mutating calls, each worker it touched is looked at: the launcher's
process table says whether the process exited (with its last log lines), and for a deployment
reached by URL the worker's system server must still answer `/health`. A worker that died is
charged to the call its log's last traceback names (a frame in the function the route calls:
`in pause_generation`), else to the last call sent before that traceback was written (a Dynamo
worker's log lines carry their time), else to the first call whose connection was lost unanswered
(the worker died answering it), else to the last one answered (calls refused at connection came
after the death): the cell fails naming that call, how the worker went and the traceback. A cell
already failed by what the call answered keeps that verdict first (a 200 `ok` followed by a crash
is judged on the answer). Where the log names or dates the fatal call, it is looked for among
all the calls sent to the worker since it started, not the current test's alone: a worker that
dies seconds after the answer that doomed it is found dead after a later test, and the death is
charged to the test that sent the call.
Later tests of the target are `skipped`, "not run: the worker died at ...", unless the launcher
restarts the worker (at most `RESTARTS` times a run); a test that failed on a worker dying of an
earlier test's call runs again (`reruns`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from ..control.ledger import SentCall
from ..errors import LaunchError
from ..model.matrix import Evidence, Outcome, TestRecord
from ..model.target import Target, WorkerWatch
from ..wire.exchange import Exchange, sequence_wire_log
from .recording import sequence_reproducer
from .state import RunState

HEALTH_DEADLINE_S = 5.0
HEALTH_ATTEMPTS = 3
"""A system server reached by URL that leaves `/health` unanswered this many times in a row (or
refuses the connection) is gone: one slow answer on a loaded machine is not a death."""
LOG_LINES = 20
DYING_S = 30.0
"""A worker whose log shows a traceback written during the test, and whose process has not
exited yet, is given this long to exit (SGLang waits 5 s for crash diagnostics, then kills its
process tree)."""
RESTARTS = 2
"""Restarts of a dead worker in one run; after them the target's later tests are not run."""
WATCH_S = 15.0
WATCH_POLL_S = 0.5
"""After a probe that may end a worker fails, on a deployment reached by URL (its workers seen
only through their system servers), the worker is watched this long: one that broke the rule
may be dying (SGLang 0.5.21 answers an invalid pause mode 200 ok, its scheduler asserts, and the
process is killed 5 s later), and its death is that probe's, not the next test's."""


LOST = "transport error"
REFUSED = "(ConnectError)"
"""A call whose connection broke without an answer (`LOST`, as "Server disconnected without
sending a response") was being answered when the worker died; one refused at connection
(`REFUSED`) or left unanswered until its deadline was sent to a worker already gone or hung."""
ERROR_LINE = re.compile(r"error|exception|assert|traceback|fatal", re.IGNORECASE)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TRACEBACK = "Traceback (most recent call last)"
STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z")
FRAME = re.compile(r'File "[^"]+", line \d+, in (\w+)')
RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")


@dataclass(frozen=True)
class Death:
    worker: str
    cause: str
    nodeid: str
    how: str
    log: str

    def describe(self) -> str:
        return f"{self.nodeid}: {self.worker} died {self.cause} ({self.how})"


def not_run(state: RunState, target_id: str) -> str | None:
    """Why a test of `target_id` cannot run: its worker died and was not brought back."""
    death = state.deaths.get(target_id)
    return None if death is None else f"not run: the worker died at {death.describe()}"


def watch_for(target: Target | None, record: TestRecord, may_end_worker: bool) -> float:
    """How long to watch the workers a test called after it (`WATCH_S` or 0): only after a
    probe that may end a worker and failed, and only on a deployment reached by URL (no
    launcher's probe), where nothing but the worker's system server shows its death. A Dynamo
    launch's process table and log place a later death on the call that caused it; our launched
    fakes' workers go as they answer."""
    if not may_end_worker or record.outcome is not Outcome.FAIL or target is None:
        return 0.0
    return WATCH_S if target.probe is None else 0.0


def after_test(
    state: RunState,
    target: Target | None,
    record: TestRecord,
    mark: int,
    exchanges: list[Exchange] | None = None,
    watch_s: float = 0.0,
) -> TestRecord | None:
    """Charge a worker that died during the test to the call that killed it; the test's
    `exchanges` (its requests, the fatal call among them) are the death's reproducer.

    A worker may die some time after the answer that doomed it (SGLang answers an invalid pause
    200 ok, its scheduler asserts, the process goes seconds later): when its log names or dates
    the fatal call, that call is looked for among every call sent to the worker since it last
    started, and when an earlier test sent it, that test's record is failed instead and returned
    (to be reported again). Without such a log the test that found the death is charged: a
    worker still serving is looked at again for `watch_s` (`watch_for`)."""
    state.call_owners.append((mark, record.nodeid))
    calls = state.ledger.history[mark:]
    if target is None or not calls or state.client is None:
        return None
    urls = list(dict.fromkeys(call.system_url for call in calls if call.system_url))
    ends = time.monotonic() + watch_s
    while True:
        for url in urls:
            own = [(mark + i, call) for i, call in enumerate(calls) if call.system_url == url]
            how, log = _gone(state, target, url, own[0][1].sent_at)
            if how is not None:
                return _died(state, target, record, mark, exchanges, url, own, how, log)
        if time.monotonic() >= ends:
            return None
        time.sleep(WATCH_POLL_S)


def _died(
    state: RunState,
    target: Target,
    record: TestRecord,
    mark: int,
    exchanges: list[Exchange] | None,
    url: str,
    own: list[tuple[int, SentCall]],
    how: str,
    log: str,
) -> TestRecord | None:
    """Charge the death of the worker at `url` (`after_test`); the earlier record amended, if
    the death was an earlier test's."""
    suspects = _calls_since_start(state, url)
    placed = _placed_by_log([call for _, call in suspects], log)
    if placed is None:  # nothing in the log places the death: charged where it was found
        index, when = _unplaced_cause([call for _, call in own])
        position, call = own[index]
    else:
        index, when = placed
        position, call = suspects[index]
    death = Death(call.label, f"{when} {call.route}", record.nodeid, how, _tail(log))
    earlier = _owner(state, record, position) if position < mark else None
    if earlier is None:
        _charge(record, death, exchanges or [])
    else:
        death = Death(death.worker, death.cause, earlier.nodeid, death.how, death.log)
        _charge(earlier, death, [])
        _note_earlier_death(record, death)
    if not _restarted(state, target, url, record):
        state.deaths[target.id] = death
    state.worker_started[url] = len(state.ledger.history)
    return earlier


def _calls_since_start(state: RunState, url: str) -> list[tuple[int, SentCall]]:
    """The calls sent to the worker at `url` since it last started, with their ledger positions."""
    start = state.worker_started.get(url, 0)
    history = state.ledger.history
    return [(i, call) for i, call in enumerate(history[start:], start) if call.system_url == url]


def _owner(state: RunState, record: TestRecord, position: int) -> TestRecord | None:
    """The record of the earlier test that sent the ledger's call at `position`."""
    owners = [nodeid for start, nodeid in state.call_owners if start <= position]
    if not owners or owners[-1] == record.nodeid:
        return None
    return next(
        (
            found
            for found in reversed(state.records)
            if found.nodeid == owners[-1] and found.target_id == record.target_id
        ),
        None,
    )


def _note_earlier_death(record: TestRecord, death: Death) -> None:
    """A test that ran while the worker was dying: a failure of it says why, a pass is kept."""
    if record.outcome in (Outcome.FAIL, Outcome.ERROR):
        record.evidence.append(
            Evidence(
                record.capabilities[0],
                f"the worker was dying: {death.describe()}",
                "worker",
                "the worker serving after the call",
                death.log or death.how,
            )
        )


def _placed_by_log(calls: list[SentCall], log: str) -> tuple[int, str] | None:
    """The position in `calls` of the call the log's last traceback names (among those sent
    before it was written, when the log dates it), else of the last call sent before that
    traceback; and whether the worker died after its answer or answering it. None when the log
    neither names nor dates the death."""
    frames = set(FRAME.findall(_last_traceback(log)))
    crashed_at = _crashed_at(log)
    before = [
        i for i, call in enumerate(calls) if crashed_at is not None and call.sent_at <= crashed_at
    ]
    sent = before if crashed_at is not None else range(len(calls))
    named = [i for i in sent if calls[i].route.rsplit("/", 1)[-1] in frames]
    for found in (named, before):
        if found:
            return found[-1], "after" if calls[found[-1]].status is not None else "answering"
    return None


def _cause(calls: list[SentCall], log: str = "") -> tuple[int, str]:
    """The position in `calls` of the call that killed the worker (`_placed_by_log`), else of the
    call the worker died answering (its connection lost, no answer), else of the last one
    answered before it went, else of the first one sent; and whether the worker died after its
    answer or answering it."""
    placed = _placed_by_log(calls, log)
    return placed if placed is not None else _unplaced_cause(calls)


def _unplaced_cause(calls: list[SentCall]) -> tuple[int, str]:
    """Where no log places the death (`_cause`): the call the worker died answering, else the
    last one answered, else the first one sent."""
    lost = [
        i
        for i, c in enumerate(calls)
        if c.status is None and c.error and LOST in c.error and REFUSED not in c.error
    ]
    if lost:
        return lost[0], "answering"
    answered = [i for i, call in enumerate(calls) if call.status is not None]
    return (answered[-1], "after") if answered else (0, "after")


def _gone(state: RunState, target: Target, url: str, since: float) -> tuple[str | None, str]:
    """How the worker at `url` went, and its log; (None, "") while it serves. A launched worker
    whose log shows a traceback written since `since` is waited for until it exits (`DYING_S`)."""
    watch = target.probe if isinstance(target.probe, WorkerWatch) else None
    if watch is not None:
        exited = watch.worker_exit(url)
        crashed = _crashed_at(watch.worker_log(url)) if exited is None else None
        if crashed is not None and crashed >= since - 1.0:
            ends = time.monotonic() + DYING_S
            while exited is None and time.monotonic() < ends:
                time.sleep(0.5)
                exited = watch.worker_exit(url)
        if exited is not None:
            code, log = exited
            return f"its process exited with code {code}", log
        return None, ""
    assert state.client is not None
    for _ in range(HEALTH_ATTEMPTS):
        answer = state.client.get(url.rstrip("/") + "/health", deadline_s=HEALTH_DEADLINE_S)
        if answer.status is not None:
            return None, ""
        if answer.error and REFUSED in answer.error:
            break  # nothing listens there any more: no need to ask again
    return f"its system server stopped answering ({answer.error})", ""


def _crashed_at(log: str) -> float | None:
    """When the log's last traceback was written (UTC seconds), if its line says."""
    lines = [line for line in log.splitlines() if TRACEBACK in line]
    found = STAMP.search(ANSI.sub("", lines[-1])) if lines else None
    if found is None:
        return None
    return datetime.fromisoformat(found.group(1)).replace(tzinfo=UTC).timestamp()


def _last_traceback(log: str) -> str:
    lines = [ANSI.sub("", line) for line in log.splitlines()]
    starts = [index for index, line in enumerate(lines) if TRACEBACK in line]
    if not starts:
        return ""
    block = lines[starts[-1] : starts[-1] + 200]
    ends = [index for index, line in enumerate(block) if index and RAISED.match(line)]
    return "\n".join(block[: ends[0] + 1] if ends else block)


def _tail(log: str) -> str:
    """The log's last traceback (its first line, then the lines that raised), else its error
    lines; then its last lines."""
    lines = [ANSI.sub("", line) for line in log.strip().splitlines()]
    block = _last_traceback(log).splitlines()
    if block and RAISED.match(block[-1]):
        shown = [block[0], *block[max(1, len(block) - 4) :]]
    else:
        shown = [line for line in lines if ERROR_LINE.search(line)][-LOG_LINES:]
    return "\n".join(dict.fromkeys([*shown, *lines[-3:]]))


def _charge(record: TestRecord, death: Death, exchanges: list[Exchange]) -> None:
    sequence = sequence_reproducer(exchanges)
    evidence = Evidence(
        record.capabilities[0],
        f"{death.worker} died {death.cause}: {death.how}",
        "worker",
        "the worker serving after the call",
        death.log or death.how,
        sequence,
        sequence_wire_log(exchanges, sequence) if exchanges else None,
    )
    if record.outcome is Outcome.FAIL:
        record.evidence.append(evidence)
        return
    record.outcome, record.reason = Outcome.FAIL, evidence.message
    record.evidence = [evidence]


def _restarted(state: RunState, target: Target, url: str, record: TestRecord) -> bool:
    watch = target.probe if isinstance(target.probe, WorkerWatch) else None
    used = state.restarts.get(target.id, 0)
    if watch is None or used >= RESTARTS:
        return False
    state.restarts[target.id] = used + 1
    try:
        watch.restart_worker(url)
    except LaunchError as exc:
        record.evidence.append(
            Evidence(record.capabilities[0], f"the restart of the worker failed: {exc}")
        )
        return False
    return True
