"""A run stopped mid-refresh: the ledger knows which workers it left held, on which weights,
and how to bring each back; the stopped run tries that once, briefly, and says what it saw."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rl_conformance.control.admin import AdminWorker
from rl_conformance.control.ledger import AdminLedger
from rl_conformance.plugin.restore import restore_held

VLLM = AdminWorker(
    instance_id=7,
    system_url="http://127.0.0.1:9101",
    routes=("pause_generation", "resume_generation", "update_weights_from_disk"),
)
SGLANG = AdminWorker(instance_id=None, system_url="http://127.0.0.1:9102", routes=None)


def test_a_pause_without_its_resume_is_held_and_names_the_undo() -> None:
    ledger = AdminLedger()
    ledger.sent(VLLM, "pause_generation")
    ledger.answered(VLLM, "pause_generation", 200, {"mode": "keep"})
    ledger.sent(VLLM, "update_weights_from_disk")
    ledger.answered(VLLM, "update_weights_from_disk", 200, {"model_path": "/ckpt/b"})
    (mark,) = ledger.held()
    assert mark.holds == {"pause_generation": "resume_generation"}
    assert "held by pause_generation" in mark.describe()
    assert "model_path=/ckpt/b" in mark.describe()
    assert mark.restore_commands() == [
        "curl -sS -X POST http://127.0.0.1:9101/engine/resume_generation "
        "-H 'Content-Type: application/json' -d '{}'"
    ]


def test_a_resume_that_answers_2xx_closes_the_hold_and_a_refused_pause_holds_nothing() -> None:
    ledger = AdminLedger()
    ledger.sent(VLLM, "pause_generation")
    ledger.answered(VLLM, "pause_generation", 200, {})
    ledger.sent(VLLM, "resume_generation")
    ledger.answered(VLLM, "resume_generation", 200, {})
    ledger.sent(SGLANG, "pause_generation")
    ledger.answered(SGLANG, "pause_generation", 400, {"mode": "bogus"})
    assert ledger.held() == []
    assert len(ledger.touched()) == 2


def test_a_pause_that_never_answered_counts_as_held_sglang_undoes_with_continue() -> None:
    ledger = AdminLedger()
    ledger.sent(SGLANG, "pause_generation")
    ledger.answered(SGLANG, "pause_generation", None, {})
    (mark,) = ledger.held()
    assert mark.holds == {"pause_generation": "continue_generation"}
    assert "no answer" in mark.describe()


@dataclass
class Answer:
    status: int | None


class Client:
    def __init__(self, statuses: dict[str, int | None]) -> None:
        self.statuses, self.sent = statuses, []

    def request(self, method: str, url: str, **kwargs: Any) -> Answer:
        self.sent.append((method, url, kwargs["deadline_s"]))
        status = self.statuses[url]
        if status is None:
            raise TimeoutError("no answer within 5 s")
        return Answer(status)


def test_restore_tries_each_held_worker_once_within_a_deadline_and_reports_each() -> None:
    ledger = AdminLedger()
    for worker in (VLLM, SGLANG):
        ledger.sent(worker, "pause_generation")
        ledger.answered(worker, "pause_generation", 200, {})
    client = Client(
        {
            "http://127.0.0.1:9101/engine/resume_generation": 200,
            "http://127.0.0.1:9102/engine/continue_generation": None,
        }
    )
    lines = restore_held(ledger, client)  # type: ignore[arg-type]
    assert [deadline for _, _, deadline in client.sent] == [5.0, 5.0]
    assert "restore resume_generation on worker 7: HTTP 200, restored" in lines
    assert any(
        "continue_generation on worker at http://127.0.0.1:9102: not answered" in line
        for line in lines
    )
    assert lines[0].startswith("workers the stopped run had touched")


def test_nothing_touched_prints_nothing_and_nothing_held_says_so() -> None:
    assert restore_held(AdminLedger(), None) == []
    ledger = AdminLedger()
    ledger.sent(VLLM, "update_weights_from_disk")
    ledger.answered(VLLM, "update_weights_from_disk", 200, {"model_path": "/ckpt/a"})
    lines = restore_held(ledger, None)
    assert lines[-1] == "none is held out of service"
    assert "model_path=/ckpt/a" in lines[1]
