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
is judged on the answer).
Later tests of the target are `skipped`, "not run: the worker died at ...", unless the launcher
restarts the worker (at most `RESTARTS` times a run).
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


def after_test(
    state: RunState,
    target: Target | None,
    record: TestRecord,
    mark: int,
    exchanges: list[Exchange] | None = None,
) -> None:
    """Charge a worker that died during the test to the last call the test sent it; the test's
    `exchanges` (its requests, the fatal call among them) are the death's reproducer."""
    calls = state.ledger.history[mark:]
    if target is None or not calls or state.client is None:
        return
    for url in dict.fromkeys(call.system_url for call in calls if call.system_url):
        how, log = _gone(state, target, url, calls[0].sent_at)
        if how is None:
            continue
        call, when = _cause([call for call in calls if call.system_url == url], log)
        death = Death(call.label, f"{when} {call.route}", record.nodeid, how, _tail(log))
        _charge(record, death, exchanges or [])
        if not _restarted(state, target, url, record):
            state.deaths[target.id] = death
        return


def _cause(calls: list[SentCall], log: str = "") -> tuple[SentCall, str]:
    """The call the log's last traceback names; else the last call sent before that traceback,
    when the log dates it; else the call the worker died answering (its connection lost, no
    answer), else the last one answered before it went, else the first one sent; and whether the
    worker died after its answer or answering it."""
    frames = set(FRAME.findall(_last_traceback(log)))
    named = [call for call in calls if call.route.rsplit("/", 1)[-1] in frames]
    crashed_at = _crashed_at(log)
    before = [call for call in calls if crashed_at is not None and call.sent_at <= crashed_at]
    for found in (named, before):
        if found:
            return found[-1], "after" if found[-1].status is not None else "answering"
    lost = [
        c
        for c in calls
        if c.status is None and c.error and LOST in c.error and REFUSED not in c.error
    ]
    if lost:
        return lost[0], "answering"
    answered = [call for call in calls if call.status is not None]
    return (answered[-1], "after") if answered else (calls[0], "after")


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
