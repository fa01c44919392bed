"""Each pause mode judged by what it does to a stream in flight: faithful crossings (as the real
Dynamo 1.6.1 + vLLM 0.31 recordings show them) pass, each way of applying another mode fails,
and a stream that says nothing about the mode is left unjudged."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from rl_conformance.checks import pause, pause_modes
from rl_conformance.checks.pause_modes import AfterResume, Crossing


def crossing(mode: str, **changes: Any) -> Crossing:
    """A faithful crossing of a 300-token stream in `mode`, shaped on
    `fixtures/dynamo-1.6.1/vllm-cpu/stream_during_pause_{abort,wait,keep}.json`: abort cut it at
    22 tokens (finish stop, detailed cancelled), wait answered once it had run to its length,
    keep held it at 30 until the resume and it then ran to 300."""
    faithful = {
        "abort": Crossing(
            "abort", 300, 20, 22, True, 22, True, 22, False, False, 0.6, "stop", "cancelled"
        ),
        "wait": Crossing("wait", 300, 20, 300, True, 300, True, 300, True, True, 0.6, "length"),
        "keep": Crossing("keep", 300, 20, 30, False, 30, False, 300, True, False, 0.6, "length"),
    }
    base = faithful["keep" if mode in ("in_place", "retract") else mode]
    return replace(base, mode=mode, **changes)


@pytest.mark.parametrize("mode", ["abort", "wait", "keep", "in_place", "retract"])
def test_a_faithful_crossing_passes(mode: str) -> None:
    found = pause_modes.pause_mode_effect(crossing(mode))
    assert found.passed, found.explain()
    assert pause_modes.unjudged(crossing(mode)) is None


@pytest.mark.parametrize(
    ("mode", "changes", "names"),
    [
        # abort applied as keep: frozen, then run to its length after the resume
        (
            "abort",
            {"ended_by_answer": False, "ended_by_resume": False, "final": 300, "completed": True},
            "length",
        ),
        (
            "abort",
            {"completed": True, "final": 300, "at_resume": 300, "ended_by_answer": False},
            "length",
        ),
        # abort applied as keep, the stream then cut at the resume
        ("abort", {"ended_by_answer": False, "ended_by_resume": False}, "still open"),
        ("abort", {"finish_reason": "length"}, "finish_reason length"),
        ("abort", {"detailed_finish_reason": "stop"}, "detailed_finish_reason"),
        # wait answered at once with the stream frozen, finished after the resume
        (
            "wait",
            {"answered": 25, "ended_by_answer": False, "at_resume": 25, "ended_by_resume": False},
            "still open",
        ),
        ("wait", {"completed": False, "final": 40, "at_resume": 40, "answered": 40}, "cut"),
        # wait answered early while the stream ran on at its own pace
        (
            "wait",
            {"answered": 25, "ended_by_answer": False, "read_late": False, "while_held": 200},
            "arrived between",
        ),
        # keep applied as abort (an in_place pause that aborted the stream)
        (
            "keep",
            {"ended_by_answer": True, "ended_by_resume": True, "final": 30, "completed": False},
            "ended",
        ),
        ("in_place", {"ended_by_resume": True, "completed": False, "final": 30}, "ended"),
        # keep not applied: tokens went on while paused, or ran the stream to its end
        ("keep", {"at_resume": 90, "while_held": 40}, "between"),
        ("keep", {"at_resume": 300, "ended_by_resume": True}, "run to its length"),
        # held, then never continued
        ("keep", {"completed": False, "final": 30}, "did not continue"),
    ],
)
def test_a_mode_applied_otherwise_fails(mode: str, changes: dict[str, Any], names: str) -> None:
    observed = crossing(mode, **changes)
    assert pause_modes.unjudged(observed) is None
    found = pause_modes.pause_mode_effect(observed)
    assert not found.passed
    assert names in found.explain()


@pytest.mark.parametrize(
    ("mode", "changes"),
    [
        # ran to its end before the pause answered: a pause that landed late looks the same
        ("abort", {"completed": True, "final": 300, "answered": 300}),
        ("keep", {"completed": True, "ended_by_answer": True, "final": 300, "answered": 300}),
        # ran to its end while paused, what came after the answer possibly read late
        (
            "keep",
            {"completed": True, "ended_by_resume": True, "at_resume": 300, "read_late": True},
        ),
    ],
)
def test_a_stream_that_shows_nothing_is_unjudged(mode: str, changes: dict[str, Any]) -> None:
    assert pause_modes.unjudged(crossing(mode, **changes)) is not None


def test_tokens_possibly_read_late_while_held_are_not_failed() -> None:
    found = pause_modes.pause_mode_effect(crossing("keep", at_resume=33, read_late=True))
    assert found.passed, found.explain()


def test_tokens_in_transit_when_a_keep_pause_answered_are_not_failed() -> None:
    """Tokens the engine generated before the pause took hold may reach the client after its
    answer (the stream and the answer travel different connections): only what arrives in the
    second half of the watch counts as generated while held."""
    found = pause_modes.pause_mode_effect(crossing("keep", at_resume=33, while_held=0))
    assert found.passed, found.explain()


def test_a_wait_pause_whose_last_tokens_were_read_after_its_answer_passes() -> None:
    """vLLM returns the last outputs of a `wait` pause about when it answers (its 20 ms sleep
    only makes that "more intuitive"): the stream's tail may be read after the answer."""
    found = pause_modes.pause_mode_effect(crossing("wait", answered=298, ended_by_answer=False))
    assert found.passed, found.explain()


def test_a_wait_pause_whose_tail_was_in_transit_at_its_answer_passes() -> None:
    """The engine drained the stream and answered; the stream's last 226 tokens reached the client
    over the frontend only after the answer, within the first half of the watch (a loaded
    machine, a fast engine): nothing arrived later, so nothing says the pause answered early."""
    tail = crossing("wait", answered=286, ended_by_answer=False, read_late=False, while_held=0)
    found = pause_modes.pause_mode_effect(tail)
    assert found.passed, found.explain()


def test_a_mode_no_effect_is_known_for_is_not_judged() -> None:
    assert pause_modes.pause_mode_effect(
        replace(crossing("keep", while_held=9), mode="drain")
    ).passed


def test_a_held_resume_fails_the_bound_and_a_prompt_one_passes() -> None:
    prompt = [AfterResume("the resume", 0.09, 1.5), AfterResume("the second resume", 0.12, 1.5)]
    assert pause_modes.resume_serves_promptly(prompt, 0.1, 1.5).passed
    held = [AfterResume("the resume", 3.2, 1.5), AfterResume("the second resume", None, 5.0)]
    found = pause_modes.resume_serves_promptly(held, 0.1, 1.5)
    assert len(found.violations) == 2
    assert "nothing within 5.0 s" in found.explain()


def test_a_late_generation_fails_only_when_the_steps_taken_again_are_late_too() -> None:
    """A hold the worker applies after every resume comes back; a stall of a loaded machine
    (2.55 s once, on a faithful fake) does not."""
    stalled = AfterResume("the resume", 2.55, 5.0, again=AfterResume("the resume", 0.01, 5.0))
    assert pause_modes.resume_serves_promptly([stalled], 0.004, 1.5).passed
    held = AfterResume("the resume", 3.5, 5.0, again=AfterResume("the resume", 3.6, 5.0))
    found = pause_modes.resume_serves_promptly([held], 0.004, 1.5)
    assert not found.passed
    assert "took 3.50 s, and 3.60 s again" in found.explain()


def test_a_pause_counted_per_caller_fails_the_cycle() -> None:
    answers = [pause.Answer("the first pause", 200, {"status": "ok"}, None, True, True)]
    assert pause.pause_cycle_answered(answers, True).passed
    found = pause.pause_cycle_answered(answers, True, "held 5.0 s, served 0.01 s after a second")
    assert not found.passed
    assert "two pauses and one resume" in found.explain()
