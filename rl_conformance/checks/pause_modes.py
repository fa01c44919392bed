"""What each pause mode does to generation, judged by its effect on a stream in flight and on the
first generation after the resume, never by the pause's answer.

The modes, as upstream defines them:

- `abort` ends every request in flight at once; the pause answers once they are ended (vLLM
  `AsyncLLM.pause_generation`: "Abort all in-flight requests immediately"; SGLang's tokenizer
  manager aborts until no request is left). A cut stream says so: Dynamo reports the abort as
  finish `stop` with `detailed_finish_reason: cancelled` (`fixtures/dynamo-1.6.1/vllm-cpu/
  stream_during_pause_abort_all_selectors.json`), SGLang's native stream as `{"type": "abort"}`.
- `wait` lets every request in flight finish; the pause answers after them (vLLM "Wait for
  in-flight requests to complete"; real Dynamo 1.6.1 answered a `wait` pause 3.7 s after it was
  sent, when its 300-token stream had ended: `pause_wait_in_flight.json`).
- `keep` (vLLM), `in_place` and `retract` (SGLang) hold requests where they are: no token until
  the resume, then they continue (vLLM "Freeze requests in queue; they resume on
  resume_generation"; SGLang `PauseGenerationReqInput`: "continue generation after
  continue_generation").

Where in a stream a pause lands is seen only by the engine, and tokens generated before it took
hold may be read after its answer (`control.inflight.InFlightStream.maybe_read_late`): what cannot
be told apart without racing the engine is left unjudged (`unjudged`), never failed. A held or
drained stream is watched for a while after the answer: what it delivers in the first half of
that watch may still be in transit (the stream and the pause's answer travel different
connections, and a `wait` pause answers as the last tokens leave the engine); only what comes
in the second half, at the stream's own pace, was generated after the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .base import MISSING, Findings, Level, Violation, check

SECTION = "Coordinate Policy Refresh"
SPEC = "Pause or drain workers when the backend requires it."
ENDS = "abort"
DRAINS = "wait"
HOLDS = "hold"
EFFECTS = {"abort": ENDS, "wait": DRAINS, "keep": HOLDS, "in_place": HOLDS, "retract": HOLDS}
"""What each mode upstream documents does to the requests in flight."""
ABORT_REASONS = ("cancelled", "abort")


def effect_of(mode: str) -> str | None:
    return EFFECTS.get(mode)


@dataclass(frozen=True)
class Crossing:
    """One stream open when a pause was sent, counted (tokens, or events for a native stream) at
    each moment the verdict needs: the pause sent, its answer read, the resume sent (after the
    stream was watched, still paused, for `watched_s`), and in all."""

    mode: str
    max_tokens: int
    sent: int
    answered: int
    ended_by_answer: bool
    at_resume: int
    ended_by_resume: bool
    final: int
    completed: bool
    """It ran to its length (`max_tokens` delivered, or finish `length`)."""
    read_late: bool
    """What arrived between the answer and the resume may have been generated before the pause
    took hold and read late."""
    watched_s: float
    finish_reason: Any = MISSING
    detailed_finish_reason: Any = MISSING
    unit: str = "tokens"
    while_held: int = 0
    """What arrived in the second half of the watch at the stream's own pace (not a backlog)."""

    @property
    def effect(self) -> str | None:
        return effect_of(self.mode)

    def describe(self) -> str:
        return (
            f"of {self.max_tokens} {self.unit}: {self.sent} when the {self.mode!r} pause was "
            f"sent, {self.answered}{' (ended)' if self.ended_by_answer else ''} when it answered, "
            f"{self.at_resume}{' (ended)' if self.ended_by_resume else ''} at the resume "
            f"({self.watched_s:.2f} s later), {self.final} in all"
        )


def unjudged(crossing: Crossing) -> str | None:
    """Why the stream says nothing about the mode, or None when it does: it ran to its length
    before a pause that must cut or hold it could have taken hold, or while held, with what came
    after the answer possibly generated before it."""
    if crossing.effect in (ENDS, HOLDS) and crossing.completed:
        if crossing.ended_by_answer:
            return (
                f"the stream ran to its end before the {crossing.mode!r} pause answered "
                f"({crossing.describe()}): a pause that landed after its end looks the same"
            )
        if crossing.ended_by_resume and crossing.read_late:
            return (
                f"the stream ran to its end while paused, but what arrived after the answer may "
                f"have been generated before the pause took hold ({crossing.describe()})"
            )
    return None


def _ends(c: Crossing) -> Findings:
    if c.completed:
        yield Violation(
            f"a pause in mode {c.mode!r} let the stream run to its length ({c.describe()})",
            "stream",
            "ended short, cut by the pause",
            f"{c.final} {c.unit} (its length)",
        )
    elif not c.ended_by_resume:
        yield Violation(
            f"a pause in mode {c.mode!r} answered, yet the stream was still open "
            f"{c.watched_s:.2f} s later, when the resume was sent ({c.describe()})",
            "stream",
            "ended by the pause's answer",
            "open until the resume",
        )
    elif c.finish_reason == "length":
        yield Violation(
            f"the stream the {c.mode!r} pause cut at {c.final} of {c.max_tokens} {c.unit} says "
            "finish_reason length: a trainer takes the cut sample for a finished one",
            "finish_reason",
            "stop with detailed_finish_reason cancelled, or the family's abort reason",
            "length",
        )
    elif c.detailed_finish_reason not in (MISSING, None, *ABORT_REASONS):
        yield Violation(
            f"the stream the {c.mode!r} pause cut at {c.final} of {c.max_tokens} {c.unit} says "
            f"detailed_finish_reason {c.detailed_finish_reason!r}",
            "nvext.detailed_finish_reason",
            "cancelled",
            c.detailed_finish_reason,
        )


def _drains(c: Crossing) -> Findings:
    if c.ended_by_resume and not c.completed:
        yield Violation(
            f"a pause in mode {c.mode!r} cut the stream short at {c.final} of "
            f"{c.max_tokens} {c.unit} ({c.describe()})",
            "stream",
            "ran to its length before the pause answered",
            f"{c.final} {c.unit}",
        )
    elif not c.ended_by_resume:
        yield Violation(
            f"a pause in mode {c.mode!r} answered while the stream was still open: "
            f"{c.watched_s:.2f} s later it had not ended ({c.describe()}); it finished only "
            "after the resume",
            "stream",
            "ended before the pause's answer",
            "open until the resume",
        )
    elif c.while_held:
        yield Violation(
            f"{c.while_held} {c.unit} arrived between {c.watched_s / 2:.2f} s after the "
            f"{c.mode!r} pause's answer and the resume, at the stream's own pace: the pause "
            f"answered before the stream ended ({c.describe()})",
            "stream",
            "ended before the pause's answer",
            f"{c.while_held} {c.unit} after it",
        )


def _holds(c: Crossing) -> Findings:
    if c.ended_by_resume and not c.completed:
        yield Violation(
            f"a pause in mode {c.mode!r} ended the stream at {c.final} of {c.max_tokens} "
            f"{c.unit}: that mode holds requests in place to continue after the resume "
            f"({c.describe()})",
            "stream",
            "held until the resume, then continued",
            f"ended at {c.final} {c.unit} while paused",
        )
    elif c.ended_by_resume:
        yield Violation(
            f"a pause in mode {c.mode!r} let the stream run to its length before the resume: "
            f"{c.at_resume - c.answered} {c.unit} after the answer, at its own pace "
            f"({c.describe()})",
            "stream",
            "no token until the resume",
            f"{c.at_resume - c.answered} {c.unit}",
        )
    elif c.while_held:
        yield Violation(
            f"{c.while_held} {c.unit} arrived between {c.watched_s / 2:.2f} s after the "
            f"{c.mode!r} pause's answer and the resume, at the stream's own pace "
            f"({c.describe()})",
            "stream",
            "no token until the resume",
            f"{c.while_held} {c.unit}",
        )
    elif not c.ended_by_resume and not c.completed:
        yield Violation(
            f"the stream held by a {c.mode!r} pause did not continue to its length after the "
            f"resume ({c.describe()})",
            "stream",
            f"{c.max_tokens} {c.unit} after the resume",
            f"{c.final} {c.unit}",
        )


@check(
    "refresh.pause_mode_effect",
    title="each pause mode does to the requests in flight what it names: abort ends them by the "
    "answer, wait lets them finish before it, keep/in_place/retract holds them until the resume",
    spec=SPEC,
    section=SECTION,
)
def pause_mode_effect(crossing: Crossing) -> Findings:
    rules = {ENDS: _ends, DRAINS: _drains, HOLDS: _holds}
    rule = rules.get(crossing.effect or "")
    if rule is not None:
        yield from rule(crossing)


@dataclass(frozen=True)
class AfterResume:
    """The first generation sent once a resume answered: how long its first token took (None:
    none within `waited_s`)."""

    what: str
    first_token_s: float | None
    waited_s: float
    again: AfterResume | None = None
    """The same steps taken again because this one was late: a hold the worker applies after
    a resume comes back, a stall of a loaded machine does not."""

    def within(self, bound_s: float) -> bool:
        return self.first_token_s is not None and self.first_token_s <= bound_s

    def took(self) -> str:
        if self.first_token_s is None:
            return f"nothing within {self.waited_s:.1f} s"
        return f"{self.first_token_s:.2f} s"


@check(
    "admin.resume_serves_promptly",
    title="a generation sent right after a resume is served within a bound the worker's own "
    "unpaused first-token time sets",
    level=Level.SHOULD,
    spec=SPEC,
    section=SECTION,
)
def resume_serves_promptly(after: list[AfterResume], unpaused_s: float, bound_s: float) -> Findings:
    """`unpaused_s`: the worker's first-token time measured unpaused, after the cycles;
    `bound_s`: the bound derived from it. A late generation whose steps, taken again, were
    served within the bound is not a violation (`AfterResume.again`)."""
    for item in after:
        if item.within(bound_s) or (item.again is not None and item.again.within(bound_s)):
            continue
        took = item.took() + ("" if item.again is None else f", and {item.again.took()} again")
        yield Violation(
            f"a generation sent right after {item.what} answered took {took} to its first "
            f"token; unpaused, the worker takes {unpaused_s:.3f} s: the resume answered ok "
            "while generation stayed held",
            "first token",
            f"within {bound_s:.2f} s",
            took,
        )
