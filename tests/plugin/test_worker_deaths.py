"""Which call a worker that died is charged to, and what of its log the cell shows."""

from __future__ import annotations

import pytest

from rl_conformance.control.ledger import SentCall
from rl_conformance.plugin.deaths import _cause, _crashed_at, _tail

URL = "http://127.0.0.1:20001"
LOST = "transport error (RemoteProtocolError): Server disconnected without sending a response."
REFUSED = "transport error (ConnectError): [Errno 111] Connection refused"


def call(route: str, status: int | None, error: str | None = None, at: float = 0.0) -> SentCall:
    return SentCall(URL, "worker 7", route, status, error, at)


CRASH = (
    "\x1b[2m2026-12-05T17:02:06.706393Z\x1b[0m ERROR scheduler.run_scheduler_process: Scheduler "
    "hit an exception: Traceback (most recent call last):"
)
CRASHED_AT = 1796490126.706393


def test_the_call_sent_before_the_logged_traceback_is_the_cause() -> None:
    """SGLang answers an invalid pause mode 200 ok and its scheduler fails an assertion; the
    resume sent next is accepted by the still-running system server and cut off when the
    process is killed: the log's traceback time tells the two apart."""
    log = "INFO up\n" + CRASH + "\nAssertionError"
    assert _crashed_at(log) == CRASHED_AT
    calls = [
        call("pause_generation", 200, at=CRASHED_AT - 0.01),
        call("continue_generation", None, LOST, at=CRASHED_AT + 0.02),
    ]
    assert _cause(calls, log) == (0, "after")
    update = [call("pause_generation", 200, at=1.0), call("update", None, LOST, at=CRASHED_AT - 1)]
    assert _cause(update, log) == (1, "answering")


def test_the_call_the_traceback_names_is_the_cause_whenever_it_was_sent() -> None:
    """The scheduler may reach the invalid pause only after the resume was sent: the function
    the traceback ran in names the call."""
    log = "\n".join(
        [
            CRASH,
            '  File "/x/sglang/srt/managers/scheduler.py", line 5590, in pause_generation',
            '    assert recv_req.mode in ("in_place", "retract")',
            "AssertionError",
        ]
    )
    calls = [
        call("pause_generation", 200, at=CRASHED_AT - 0.05),
        call("continue_generation", None, LOST, at=CRASHED_AT - 0.01),
    ]
    assert _cause(calls, log) == (0, "after")


def test_a_named_call_sent_after_the_traceback_was_written_is_not_the_cause() -> None:
    """A later test paused the worker again while its scheduler was already dead: the pause
    the traceback names is the one sent before it was written."""
    log = "\n".join(
        [CRASH, '  File "/x/scheduler.py", line 1, in pause_generation', "AssertionError"]
    )
    calls = [
        call("pause_generation", 200, at=CRASHED_AT - 0.05),
        call("continue_generation", 200, at=CRASHED_AT - 0.01),
        call("pause_generation", 500, at=CRASHED_AT + 2.0),
    ]
    assert _cause(calls, log) == (0, "after")


def test_a_crash_after_an_answer_is_charged_to_that_call_not_to_the_refused_ones() -> None:
    """SGLang answers an invalid pause mode 200 ok, then dies: the resume sent next is refused."""
    calls = [call("pause_generation", 200), call("continue_generation", None, REFUSED)]
    assert _cause(calls) == (0, "after")


def test_a_crash_while_answering_is_charged_to_the_call_that_lost_its_connection() -> None:
    """An update sent while an in-place pause holds a running request: SGLang dies on it."""
    calls = [
        call("pause_generation", 200),
        call("control/update_weights_from_disk", None, LOST),
        call("continue_generation", None, REFUSED),
    ]
    assert _cause(calls) == (1, "answering")


def test_a_call_left_unanswered_until_its_deadline_is_not_the_cause() -> None:
    calls = [call("pause_generation", 200), call("continue_generation", None, "no answer in 10 s")]
    assert _cause(calls) == (0, "after")


def test_the_log_shows_the_error_lines_then_the_last_ones() -> None:
    log = "\n".join(
        [
            "\x1b[32m INFO\x1b[0m serving",
            "Traceback (most recent call last):",
            "    assert recv_req.mode in ('in_place', 'retract')",
            "AssertionError",
            "INFO one",
            "INFO two",
            "INFO kill_process_tree called",
        ]
    )
    shown = _tail(log).splitlines()
    assert shown[:3] == [
        "Traceback (most recent call last):",
        "    assert recv_req.mode in ('in_place', 'retract')",
        "AssertionError",
    ]
    assert shown[-1] == "INFO kill_process_tree called"
    assert "\x1b" not in "".join(shown)


def test_a_death_carries_the_tests_requests_as_its_reproducer() -> None:
    """The cell a death fails shows the requests the test sent, the fatal call among them, and
    their wire log: a reader can send them again."""
    from rl_conformance.model.matrix import Outcome, TestRecord
    from rl_conformance.plugin.deaths import Death, _charge
    from rl_conformance.wire.exchange import Exchange, WireRequest

    pause = Exchange(WireRequest("POST", URL + "/engine/pause_generation", {}), status=200)
    record = TestRecord("t.py::x", ("admin.invalid_pause_mode",), "fake", Outcome.PASS)
    _charge(record, Death("worker 7", "after pause_generation", "t.py::x", "gone", ""), [pause])
    assert record.outcome is Outcome.FAIL
    (evidence,) = record.evidence
    assert evidence.reproducer is not None and evidence.reproducer.startswith("# 1 request(s)")
    assert "/engine/pause_generation" in evidence.reproducer
    assert evidence.wire is not None


class _Answers:
    """A client whose `/health` answers come from a list, in order."""

    def __init__(self, *answers: tuple[int | None, str | None]) -> None:
        self.answers = list(answers)
        self.asked = 0

    def get(self, url: str, deadline_s: float) -> object:
        from types import SimpleNamespace

        status, error = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        return SimpleNamespace(status=status, error=error)


def gone_with(client: _Answers) -> str | None:
    from types import SimpleNamespace

    from rl_conformance.plugin.deaths import _gone

    state = SimpleNamespace(client=client)
    target = SimpleNamespace(probe=None)
    return _gone(state, target, URL, 0.0)[0]  # type: ignore[arg-type]


def test_one_unanswered_health_read_on_a_loaded_machine_is_not_a_death() -> None:
    late = "transport error (ReadTimeout): no complete response within the 5 s deadline"
    assert gone_with(_Answers((None, late), (200, None))) is None
    hung = _Answers((None, late))
    assert gone_with(hung) == f"its system server stopped answering ({late})"
    assert hung.asked == 3


def test_a_refused_connection_is_a_death_at_once() -> None:
    refused = _Answers((None, REFUSED))
    assert gone_with(refused) == f"its system server stopped answering ({REFUSED})"
    assert refused.asked == 1


class _Launched:
    """A launcher's view of one worker whose process exits with `log` once `dead` is set."""

    def __init__(self, log: str) -> None:
        self.log, self.dead, self.restarted = log, False, 0

    def worker_exit(self, system_url: str) -> tuple[int, str] | None:
        return (-9, self.log) if self.dead else None

    def worker_log(self, system_url: str) -> str:
        return self.log if self.dead else "INFO serving"

    def restart_worker(self, system_url: str) -> None:
        self.restarted += 1
        self.dead = False


def test_a_worker_found_dead_after_a_later_test_is_charged_to_the_test_that_doomed_it() -> None:
    """SGLang answers an invalid pause 200 ok and exits seconds later, after the next test began:
    the earlier test's record is failed naming the call and returned to be reported again; the
    later test's failure says the worker was dying; the worker is restarted for the tests after."""
    from types import SimpleNamespace

    from rl_conformance.control.ledger import AdminLedger
    from rl_conformance.model.matrix import Outcome, TestRecord
    from rl_conformance.plugin.deaths import after_test

    log = "\n".join(
        [CRASH, '  File "/x/scheduler.py", line 1, in pause_generation', "AssertionError"]
    )
    watch = _Launched(log)
    target = SimpleNamespace(id="dynamo-sglang", probe=watch)
    ledger = AdminLedger()
    invalid = TestRecord("s.py::invalid", ("admin.invalid_pause_mode",), target.id, Outcome.FAIL)
    cycles = TestRecord("s.py::cycles", ("admin.pause_cycles",), target.id, Outcome.FAIL)
    state = SimpleNamespace(
        ledger=ledger,
        client=object(),
        records=[invalid],
        call_owners=[],
        worker_started={},
        deaths={},
        restarts={},
    )
    ledger.history += [
        call("pause_generation", 200, at=CRASHED_AT - 0.05),
        call("continue_generation", 200, at=CRASHED_AT - 0.02),
    ]
    assert after_test(state, target, invalid, 0) is None  # type: ignore[arg-type]
    assert invalid.evidence == []  # alive when that test ended

    watch.dead = True
    ledger.history += [call("pause_generation", 500, at=CRASHED_AT + 3.0)]
    amended = after_test(state, target, cycles, 2)  # type: ignore[arg-type]
    assert amended is invalid
    (death,) = invalid.evidence
    assert death.message.startswith("worker 7 died after pause_generation: its process exited")
    (dying,) = cycles.evidence
    assert dying.message.startswith("the worker was dying: s.py::invalid: worker 7 died after")
    assert watch.restarted == 1 and state.deaths == {}
    assert state.worker_started[URL] == 3  # the calls before the restart are not looked at again


def test_a_record_written_again_replaces_the_first_in_a_journal() -> None:
    from rl_conformance.model.journal import JournalContents
    from rl_conformance.model.matrix import Outcome, TestRecord

    contents = JournalContents(header={})
    contents.add(TestRecord("s.py::a", ("x",), "t", Outcome.PASS))
    contents.add(TestRecord("s.py::b", ("y",), "t", Outcome.PASS))
    contents.add(TestRecord("s.py::a", ("x",), "t", Outcome.FAIL))
    assert [(r.nodeid, r.outcome) for r in contents.records] == [
        ("s.py::a", Outcome.FAIL),
        ("s.py::b", Outcome.PASS),
    ]


def test_a_death_no_log_places_is_charged_to_the_test_that_found_it() -> None:
    """A worker reached by URL (no log) found gone: an earlier test whose calls were answered is
    not failed on a guess; the test whose calls were refused is charged."""
    from types import SimpleNamespace

    from rl_conformance.control.ledger import AdminLedger
    from rl_conformance.model.matrix import Outcome, TestRecord
    from rl_conformance.plugin.deaths import after_test

    ledger = AdminLedger()
    earlier = TestRecord("s.py::earlier", ("admin.pause_cycles",), "external", Outcome.PASS)
    later = TestRecord("s.py::later", ("admin.invalid_pause_mode",), "external", Outcome.PASS)
    state = SimpleNamespace(
        ledger=ledger,
        client=_Answers((None, REFUSED)),
        records=[earlier],
        call_owners=[(0, earlier.nodeid)],
        worker_started={},
        deaths={},
        restarts={},
    )
    ledger.history += [call("pause_generation", 200), call("continue_generation", 200)]
    ledger.history += [call("pause_generation", None, REFUSED)]
    target = SimpleNamespace(id="external", probe=None)
    assert after_test(state, target, later, 2) is None  # type: ignore[arg-type]
    assert earlier.outcome is Outcome.PASS and earlier.evidence == []
    (death,) = later.evidence
    assert death.message.startswith("worker 7 died after pause_generation: its system server")


def test_a_failed_probe_that_may_end_a_worker_watches_it_and_is_charged_its_death(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SGLang answers an invalid pause mode 200 ok, and its process is killed 5 s later: by URL
    its system server answers until then. The probe that failed watches it, so the death is the
    probe's, not the next test's; a worker that keeps serving costs the watch and nothing else."""
    from types import SimpleNamespace

    from rl_conformance.control.ledger import AdminLedger
    from rl_conformance.model.matrix import Outcome, TestRecord
    from rl_conformance.plugin import deaths

    monkeypatch.setattr(deaths, "WATCH_POLL_S", 0.01)
    ledger = AdminLedger()
    probe = TestRecord("s.py::invalid", ("admin.invalid_pause_mode",), "external", Outcome.FAIL)
    dying = _Answers((200, None), (200, None), (200, None), (None, REFUSED))
    state = SimpleNamespace(
        ledger=ledger,
        client=dying,
        records=[],
        call_owners=[],
        worker_started={},
        deaths={},
        restarts={},
    )
    ledger.history += [call("pause_generation", 200), call("continue_generation", 200)]
    target = SimpleNamespace(id="external", probe=None, kind="external")
    watch_s = deaths.watch_for(target, probe, True)  # type: ignore[arg-type]
    assert watch_s == deaths.WATCH_S
    assert deaths.after_test(state, target, probe, 0, None, watch_s) is None  # type: ignore[arg-type]
    assert dying.asked == 4
    (death,) = probe.evidence
    assert death.message.startswith("worker 7 died after continue_generation: its system server")
    assert state.deaths["external"].nodeid == "s.py::invalid"

    serving = _Answers((200, None))
    state.client, state.deaths, state.call_owners = serving, {}, []
    ledger.history = [call("pause_generation", 200)]
    kept = TestRecord("s.py::cycles", ("admin.pause_cycles",), "external", Outcome.FAIL)
    assert deaths.after_test(state, target, kept, 0, None, 0.05) is None  # type: ignore[arg-type]
    assert serving.asked > 1 and kept.evidence == [] and state.deaths == {}


def test_only_a_failed_probe_on_a_worker_seen_by_its_system_server_is_watched() -> None:
    from types import SimpleNamespace

    from rl_conformance.model.matrix import Outcome, TestRecord
    from rl_conformance.plugin.deaths import WATCH_S, watch_for

    failed = TestRecord("s.py::x", ("admin.invalid_pause_mode",), "t", Outcome.FAIL)
    passed = TestRecord("s.py::x", ("admin.invalid_pause_mode",), "t", Outcome.PASS)
    by_url = SimpleNamespace(probe=None, kind="external")
    assert watch_for(by_url, failed, True) == WATCH_S  # type: ignore[arg-type]
    assert watch_for(by_url, failed, False) == 0  # type: ignore[arg-type]
    assert watch_for(by_url, passed, True) == 0  # type: ignore[arg-type]
    launched = SimpleNamespace(probe=_Launched(""), kind="dynamo")  # its log places a death
    assert watch_for(launched, failed, True) == 0  # type: ignore[arg-type]
    ours = SimpleNamespace(probe=object(), kind="fake")  # our fakes' workers go as they answer
    assert watch_for(ours, failed, True) == 0  # type: ignore[arg-type]
