"""Each pause mode judged by what it does to a stream in flight: faithful crossings (as the real
Dynamo 1.6.1 + vLLM 0.31 recordings show them) pass, each way of applying another mode fails,
and a stream that says nothing about the mode is left unjudged."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from rl_conformance.checks import pause, pause_modes
from rl_conformance.checks.pause_modes import AfterResume, Crossing, Generated

TOKENS = "generated tokens"


def counted(start: float, answered: float, settled: float, resumed: float, end: float) -> Generated:
    return Generated(TOKENS, start, answered, settled, resumed, end)


def unnamed(mode: str, **changes: Any) -> Crossing:
    """A crossing in `mode` of a pause sent without naming one."""
    return replace(crossing(mode, **changes), mode="")


def crossing(mode: str, **changes: Any) -> Crossing:
    """A faithful crossing of a 300-token stream in `mode`, shaped on
    `fixtures/dynamo-1.6.1/vllm-cpu/stream_during_pause_{abort,wait,keep}.json`: abort cut it at
    22 tokens (finish stop, detailed cancelled), wait answered once it had run to its length,
    keep held it at 30 until the resume and it then ran to 300; its worker's counters agree."""
    faithful = {
        "abort": Crossing(
            "abort",
            300,
            20,
            22,
            True,
            22,
            True,
            22,
            False,
            0.6,
            "stop",
            "cancelled",
            generated=counted(0, 22, 22, 22, 22),
        ),
        "wait": Crossing(
            "wait",
            300,
            20,
            300,
            True,
            300,
            True,
            300,
            True,
            0.6,
            "length",
            generated=counted(0, 300, 300, 300, 300),
        ),
        "keep": Crossing(
            "keep",
            300,
            20,
            30,
            False,
            30,
            False,
            300,
            True,
            0.6,
            "length",
            generated=counted(0, 30, 30, 30, 300),
        ),
    }
    base = faithful["keep" if mode in ("in_place", "retract") else mode]
    return replace(base, mode=mode, **changes)


@pytest.mark.parametrize("mode", ["abort", "wait", "keep", "in_place", "retract"])
def test_a_faithful_crossing_passes(mode: str) -> None:
    found = pause_modes.pause_mode_effect(crossing(mode))
    assert found.passed, found.explain()
    assert pause_modes.unjudged(crossing(mode)) is None


SLOW_LINK = {
    # held at 30 by the engine; its backlog reached the client after the answer, until the
    # resume, at the link's pace
    "keep": {"answered": 12, "at_resume": 30},
    "in_place": {"answered": 4, "at_resume": 26},
    # drained before the answer; the last 200 tokens and the end arrived after the resume
    "wait": {"answered": 100, "ended_by_answer": False, "at_resume": 180, "ended_by_resume": False},
    # held at 207 of 300, the pause sent late (its first token came late); its backlog arrived
    # until the resume
    "retract": {"answered": 32, "at_resume": 192, "generated": counted(0, 207, 207, 207, 300)},
    # cut at 22; the cut end arrived after the resume
    "abort": {"answered": 10, "ended_by_answer": False, "at_resume": 15, "ended_by_resume": False},
}


@pytest.mark.parametrize("mode", sorted(SLOW_LINK))
def test_a_faithful_crossing_read_late_through_a_slow_link_passes(mode: str) -> None:
    """Behind a slow or buffering link the stream's tokens and end arrive late; the engine did
    the same, and its counters say so: nothing fails."""
    late = crossing(mode, **SLOW_LINK[mode])
    assert pause_modes.unjudged(late) is None
    found = pause_modes.pause_mode_effect(late)
    assert found.passed, found.explain()


@pytest.mark.parametrize(
    ("mode", "changes", "names"),
    [
        # abort applied as keep: frozen, then run to its length after the resume
        (
            "abort",
            {
                "ended_by_answer": False,
                "ended_by_resume": False,
                "final": 300,
                "completed": True,
                "generated": counted(0, 22, 22, 22, 300),
            },
            "length",
        ),
        # abort not applied: generated on while paused, to its length
        (
            "abort",
            {
                "completed": True,
                "final": 300,
                "at_resume": 300,
                "ended_by_answer": False,
                "generated": counted(0, 22, 200, 300, 300),
            },
            "while paused",
        ),
        ("abort", {"finish_reason": "length"}, "finish_reason length"),
        ("abort", {"detailed_finish_reason": "stop"}, "detailed_finish_reason"),
        # wait answered at once with the stream frozen, finished after the resume
        (
            "wait",
            {
                "answered": 25,
                "ended_by_answer": False,
                "at_resume": 25,
                "ended_by_resume": False,
                "generated": counted(0, 25, 25, 25, 300),
            },
            "still being generated",
        ),
        ("wait", {"completed": False, "final": 40, "at_resume": 40, "answered": 40}, "cut"),
        # wait answered early while the stream ran on at its own pace
        (
            "wait",
            {"answered": 25, "ended_by_answer": False, "generated": counted(0, 25, 200, 290, 300)},
            "while paused",
        ),
        # keep applied as abort (an in_place pause that aborted the stream)
        (
            "keep",
            {"ended_by_answer": True, "ended_by_resume": True, "final": 30, "completed": False},
            "ended",
        ),
        ("in_place", {"ended_by_resume": True, "completed": False, "final": 30}, "ended"),
        # keep not applied: tokens went on while paused, or ran the stream to its end
        ("keep", {"at_resume": 90, "generated": counted(0, 30, 60, 90, 300)}, "while paused"),
        (
            "keep",
            {"at_resume": 300, "ended_by_resume": True, "generated": counted(0, 30, 300, 300, 300)},
            "run to its length",
        ),
        # the same, counted in response bytes (136 a token)
        (
            "retract",
            {"generated": Generated("response bytes", 0, 4080, 4080, 9520, 40800)},
            "40 tokens' worth",
        ),
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
    ("mode", "changes", "names"),
    [
        # ran to its end before the pause answered: a pause that landed late looks the same
        ("abort", {"completed": True, "final": 300, "answered": 300}, "before the 'abort'"),
        (
            "keep",
            {
                "completed": True,
                "ended_by_answer": True,
                "ended_by_resume": True,
                "final": 300,
                "answered": 300,
            },
            "before the 'keep'",
        ),
        # its worker had generated it all when the pause answered; its end read late
        (
            "abort",
            {
                "completed": True,
                "final": 300,
                "ended_by_answer": False,
                "generated": counted(0, 300, 300, 300, 300),
            },
            "before the 'abort'",
        ),
        (
            "keep",
            {
                "completed": True,
                "ended_by_resume": True,
                "at_resume": 300,
                "generated": counted(0, 296, 300, 300, 300),
            },
            "before the 'keep'",
        ),
        # only the worker's counters could tell, and it publishes none
        (
            "abort",
            {"completed": True, "final": 300, "ended_by_answer": False, "generated": None},
            "/metrics",
        ),
        ("keep", {"ended_by_resume": True, "at_resume": 300, "generated": None}, "/metrics"),
        ("wait", {"ended_by_answer": False, "generated": None}, "/metrics"),
    ],
)
def test_a_stream_that_shows_nothing_is_unjudged(
    mode: str, changes: dict[str, Any], names: str
) -> None:
    observed = crossing(mode, **changes)
    why = pause_modes.unjudged(observed)
    assert why is not None and names in why, why
    assert pause_modes.pause_mode_effect(observed).passed


def test_a_stream_held_until_the_resume_passes_without_counters() -> None:
    """Its end read after the resume and its length reached after it: what the stream alone
    shows is enough for a hold that has no counters to read."""
    found = pause_modes.pause_mode_effect(crossing("keep", generated=None))
    assert found.passed, found.explain()
    assert pause_modes.unjudged(crossing("keep", generated=None)) is None


def test_tokens_in_transit_when_a_keep_pause_answered_are_not_failed() -> None:
    """Tokens the engine generated before the pause took hold reach the client after its answer
    (the stream and the answer travel different connections, the stream perhaps through a slow
    link): the worker's counters say they were generated before it."""
    found = pause_modes.pause_mode_effect(crossing("keep", answered=2, at_resume=30))
    assert found.passed, found.explain()


def test_a_wait_pause_whose_tail_was_in_transit_at_its_answer_passes() -> None:
    """vLLM returns the last outputs of a `wait` pause about when it answers: the stream's tail
    may be read after the answer, its worker had generated it all."""
    tail = crossing(
        "wait", answered=286, ended_by_answer=False, generated=counted(0, 298, 300, 300, 300)
    )
    found = pause_modes.pause_mode_effect(tail)
    assert found.passed, found.explain()


def test_a_mode_no_effect_is_known_for_is_not_judged() -> None:
    held = crossing("keep", generated=counted(0, 30, 30, 39, 300))
    assert not pause_modes.pause_mode_effect(held).passed
    assert pause_modes.pause_mode_effect(replace(held, mode="drain")).passed


@pytest.mark.parametrize(
    ("observed", "behaved"),
    [
        (unnamed("abort"), "abort"),
        (unnamed("keep"), "keep"),
        # held late in the stream (a slow link's first token came late): held all the same
        (unnamed("keep", generated=counted(0, 207, 207, 207, 300)), "keep"),
        (unnamed("keep", generated=counted(0, 30, 90, 200, 300)), "none"),
        (
            unnamed(
                "keep",
                ended_by_resume=True,
                at_resume=300,
                generated=counted(0, 30, 300, 300, 300),
            ),
            "none",
        ),
        # its worker had generated it all when the pause answered: says nothing
        (unnamed("wait"), None),
        (unnamed("keep", generated=None), None),
    ],
)
def test_a_pause_without_a_mode_behaves_as_what_the_engine_did(
    observed: Crossing, behaved: str | None
) -> None:
    found, evidence = pause_modes.behaved_as(observed)
    assert found == behaved, evidence
    assert "pause without a mode" in evidence


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


def test_a_stream_that_named_no_token_prices_nothing() -> None:
    """A worker counted in bytes prices a token from what the stream delivered; a stream that
    named none gives no price, and nothing is said of what was generated while paused."""
    counted_in_bytes = Generated("response bytes", 0, 4080, 4080, 9520, 40800)
    assert counted_in_bytes.tokens_while_paused(0) is None
    assert counted_in_bytes.tokens_while_paused(300) == 40
    assert Generated(TOKENS, 0, 30, 30, 30, 300).share_at_answer(0) is None
