"""Which call a worker that died is charged to, and what of its log the cell shows."""

from __future__ import annotations

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
    assert _cause(calls, log) == (calls[0], "after")
    update = [call("pause_generation", 200, at=1.0), call("update", None, LOST, at=CRASHED_AT - 1)]
    assert _cause(update, log) == (update[1], "answering")


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
    assert _cause(calls, log) == (calls[0], "after")


def test_a_crash_after_an_answer_is_charged_to_that_call_not_to_the_refused_ones() -> None:
    """SGLang answers an invalid pause mode 200 ok, then dies: the resume sent next is refused."""
    calls = [call("pause_generation", 200), call("continue_generation", None, REFUSED)]
    assert _cause(calls) == (calls[0], "after")


def test_a_crash_while_answering_is_charged_to_the_call_that_lost_its_connection() -> None:
    """An update sent while an in-place pause holds a running request: SGLang dies on it."""
    calls = [
        call("pause_generation", 200),
        call("control/update_weights_from_disk", None, LOST),
        call("continue_generation", None, REFUSED),
    ]
    assert _cause(calls) == (calls[1], "answering")


def test_a_call_left_unanswered_until_its_deadline_is_not_the_cause() -> None:
    calls = [call("pause_generation", 200), call("continue_generation", None, "no answer in 10 s")]
    assert _cause(calls) == (calls[0], "after")


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
