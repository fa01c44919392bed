"""What each pause mode does to generation, judged by what the engine did to a stream in flight
and to the first generation after the resume, never by the pause's answer, and never by when the
stream's tokens arrived.

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

The spec fixes no pace for a stream's events, and an ingress, a proxy or a congested network may
deliver them late: a token that arrives after a pause's answer may have been generated long
before it. So what the stream alone says is used only where it holds whatever the link: a stream
cut short was cut; a terminal read before some moment was generated before it. The rest is read
from the worker's own counters (`control.worker_meter`), read from the worker at each moment:
how much of the stream it had generated when its pause answered, and what it generated while
paused. Where that decides and the worker publishes no counters, the stream is left unjudged
(`unjudged`), never failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import contract
from .base import MISSING, Findings, Violation, check

ENDS = "abort"
DRAINS = "wait"
HOLDS = "hold"
EFFECTS = {"abort": ENDS, "wait": DRAINS, "keep": HOLDS, "in_place": HOLDS, "retract": HOLDS}
"""What each mode upstream documents does to the requests in flight."""
ABORT_REASONS = ("cancelled", "abort")
FINISHED_SHARE = 0.9
"""A stream its worker had generated at least this share of when the pause answered is taken to
have finished before the pause took hold: the counters are read a moment after the answer, and
a step's tokens may still be on their way into them (32 at once on our fakes). A pause applied
otherwise lands early in a stream far longer than any step takes (`control.inflight`)."""
TOKENS = "generated tokens"
"""The unit of a worker's counters that count tokens (else they count response bytes)."""
UNCOUNTED = (
    "they could not be read (its system server's /metrics publishes neither "
    "vllm:generation_tokens_total nor the generate endpoint's "
    "dynamo_component_response_bytes_total, or did not answer)"
)
TOKENS_WHILE_PAUSED = 1.0
"""What a worker may generate while paused, in tokens' worth: less than one token is counting
noise, never generation."""


def effect_of(mode: str) -> str | None:
    return EFFECTS.get(mode)


@dataclass(frozen=True)
class Generated:
    """What the worker a stream was pinned to generated, by its own counters (`unit`: its
    generated tokens, or its generate endpoint's response bytes), read before the stream was
    sent, once the pause answered, after the first half of the watch (`settled`: what was on its
    way inside the worker when the pause took hold is counted by then), just before the resume,
    and once the stream had ended."""

    unit: str
    start: float
    answered: float
    settled: float
    at_resume: float
    end: float

    def cost(self, tokens: int) -> float | None:
        """What the whole stream (`tokens` delivered in all) cost its worker, in its unit: its
        tokens, counted by the engine; or the response bytes the worker sent from the stream's
        start to its end (no other request generated there meanwhile: the one a test pins to a
        worker it pauses)."""
        if self.unit == TOKENS:
            return float(tokens) if tokens > 0 else None
        cost = self.end - self.start
        return cost if cost > 0 else None

    def share_at_answer(self, tokens: int) -> float | None:
        """The share of the stream its worker had generated when the pause answered."""
        cost = self.cost(tokens)
        if cost is None:
            return None
        return min(1.0, max(0.0, self.answered - self.start) / cost)

    def tokens_while_paused(self, tokens: int) -> float | None:
        """What the worker generated between the settled read and the resume, in tokens' worth
        (`tokens`: what the whole stream delivered, to price a token in bytes)."""
        grew = self.at_resume - self.settled
        cost = self.cost(tokens)
        if self.unit == TOKENS:
            return grew
        return None if cost is None or tokens <= 0 else grew / (cost / tokens)

    def describe(self, tokens: int) -> str:
        share = self.share_at_answer(tokens)
        during = self.tokens_while_paused(tokens)
        return (
            f"its worker's {self.unit}: "
            f"{'unknown' if share is None else f'{share:.0%}'} of the stream generated when the "
            f"pause answered, {'unknown' if during is None else f'{during:.0f}'} tokens' worth "
            "while paused"
        )


@dataclass(frozen=True)
class Crossing:
    """One stream open when a pause was sent, counted (tokens, or events for a native stream) as
    read at each moment the verdict needs: the pause sent, its answer read, the resume sent
    (after the stream was watched, still paused, for `watched_s`), and in all; and what its
    worker generated meanwhile, by its own counters (`generated`: None when it publishes none).

    Counts read at a moment are lower bounds of what the engine had generated by then, whatever
    the link: they may lag, never lead."""

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
    watched_s: float
    finish_reason: Any = MISSING
    detailed_finish_reason: Any = MISSING
    unit: str = "tokens"
    generated: Generated | None = None

    @property
    def effect(self) -> str | None:
        return effect_of(self.mode)

    @property
    def pause(self) -> str:
        return f"{self.mode!r} pause" if self.mode else "pause without a mode"

    def share_at_answer(self) -> float | None:
        return None if self.generated is None else self.generated.share_at_answer(self.final)

    def while_paused(self) -> float | None:
        """Tokens' worth the worker generated while paused (None: not observable)."""
        return None if self.generated is None else self.generated.tokens_while_paused(self.final)

    def finished_before_answer(self) -> bool | None:
        """Whether the worker had (nearly) generated the whole stream when the pause answered:
        a terminal read before the answer says so whatever the link, else its counters do."""
        if self.ended_by_answer and self.completed:
            return True
        share = self.share_at_answer()
        return None if share is None else share >= FINISHED_SHARE

    def describe(self) -> str:
        read = (
            f"of {self.max_tokens} {self.unit}: {self.sent} read when the {self.pause} was sent,"
            f" {self.answered}{' (ended)' if self.ended_by_answer else ''} when it "
            f"answered, {self.at_resume}{' (ended)' if self.ended_by_resume else ''} at the "
            f"resume ({self.watched_s:.2f} s later), {self.final} in all"
        )
        if self.generated is None:
            return read
        return f"{read}; {self.generated.describe(self.final)}"


def unjudged(crossing: Crossing) -> str | None:
    """Why the stream says nothing about the mode, or None when it does: it ran to its length,
    where a pause that must cut or hold it could only have landed after its end (its worker had
    generated it before the answer), or where only its worker's counters could tell, and it
    publishes none."""
    effect = crossing.effect
    if effect is None or not crossing.completed:
        return None
    if effect == DRAINS and crossing.ended_by_answer:
        return None
    if effect == HOLDS and not crossing.ended_by_resume:
        return None
    finished = crossing.finished_before_answer()
    if finished is None:
        return (
            f"the stream ran to its length ({crossing.describe()}), and only its worker's "
            f"counters could tell whether that was before the pause took hold: {UNCOUNTED}"
        )
    if finished and effect != DRAINS:
        return (
            f"the stream had run to its end before the {crossing.mode!r} pause answered "
            f"({crossing.describe()}): a pause that landed after its end looks the same"
        )
    return None


def behaved_as(crossing: Crossing) -> tuple[str | None, str]:
    """The mode a pause behaved as (`control.pause_default_mode`'s vocabulary: `abort` cut the
    stream, `keep` held it until the resume, `none` let it be generated while paused), and the
    evidence; None, with why, when the stream shows nothing about the pause (it ran to its end
    before the pause took hold, or only the worker's counters could tell and there are none)."""
    evidence = crossing.describe()
    if not crossing.completed:
        return "abort", evidence
    during = crossing.while_paused()
    if during is not None and during >= TOKENS_WHILE_PAUSED:
        return "none", evidence
    finished = crossing.finished_before_answer()
    if finished:
        return None, f"the stream ran to its end before the pause was answered ({evidence})"
    if finished is None:
        return None, (
            "the stream ran to its length, and only its worker's counters could tell whether "
            f"it was held: {UNCOUNTED} ({evidence})"
        )
    return ("none" if crossing.ended_by_resume else "keep"), evidence


def _generated_while_paused(c: Crossing) -> Findings:
    during = c.while_paused()
    if during is not None and during >= TOKENS_WHILE_PAUSED:
        assert c.generated is not None
        yield Violation(
            f"the worker generated {during:.0f} tokens' worth ({c.generated.unit}) between "
            f"{c.watched_s / 2:.2f} s after the {c.mode!r} pause's answer and the resume, by "
            f"its own counters ({c.describe()})",
            "pause_generation",
            "nothing generated while paused",
            f"{during:.0f} tokens' worth",
        )


def _ends(c: Crossing) -> Findings:
    if c.completed:
        if c.finished_before_answer() is False:
            yield Violation(
                f"a pause in mode {c.mode!r} let the stream run to its length: its worker had "
                f"generated less than {FINISHED_SHARE:.0%} of it when the pause answered "
                f"({c.describe()})",
                "stream",
                "ended short, cut by the pause",
                f"{c.final} {c.unit} (its length)",
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
    yield from _generated_while_paused(c)


def _drains(c: Crossing) -> Findings:
    if not c.completed:
        yield Violation(
            f"a pause in mode {c.mode!r} cut the stream short at {c.final} of "
            f"{c.max_tokens} {c.unit} ({c.describe()})",
            "stream",
            "ran to its length before the pause answered",
            f"{c.final} {c.unit}",
        )
    elif c.finished_before_answer() is False:
        yield Violation(
            f"a pause in mode {c.mode!r} answered while the stream was still being generated: "
            f"its worker had generated less than {FINISHED_SHARE:.0%} of it when the pause "
            f"answered, and it ran to its length after ({c.describe()})",
            "stream",
            "ended before the pause's answer",
            "generated after it",
        )
    yield from _generated_while_paused(c)


def _holds(c: Crossing) -> Findings:
    if not c.completed and c.ended_by_resume:
        yield Violation(
            f"a pause in mode {c.mode!r} ended the stream at {c.final} of {c.max_tokens} "
            f"{c.unit}: that mode holds requests in place to continue after the resume "
            f"({c.describe()})",
            "stream",
            "held until the resume, then continued",
            f"ended at {c.final} {c.unit} while paused",
        )
    elif not c.completed:
        yield Violation(
            f"the stream held by a {c.mode!r} pause did not continue to its length after the "
            f"resume ({c.describe()})",
            "stream",
            f"{c.max_tokens} {c.unit} after the resume",
            f"{c.final} {c.unit}",
        )
    elif c.ended_by_resume and c.finished_before_answer() is False:
        yield Violation(
            f"a pause in mode {c.mode!r} let the stream run to its length before the resume: "
            f"its end was read before the resume was sent, and its worker had generated less "
            f"than {FINISHED_SHARE:.0%} of it when the pause answered ({c.describe()})",
            "stream",
            "no token until the resume",
            f"{c.final - c.answered} {c.unit} after the answer",
        )
    yield from _generated_while_paused(c)


@check(contract.refresh.PAUSE_MODE_EFFECT)
def pause_mode_effect(crossing: Crossing) -> Findings:
    """Only what the crossing proves: a stream that may have run to its end before the pause
    took hold is not failed for it (`unjudged` says why nothing was judged)."""
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


@check(contract.admin.RESUME_SERVES_PROMPTLY)
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
