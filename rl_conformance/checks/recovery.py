"""A worker whose engine died and was restarted by its sidecar (Dynamo 1.7's native vLLM sidecar
recovers a dead engine by itself).

The restarted engine holds its starting weights, whatever was applied before the crash: a worker
that still reports the pre-crash weight version would have a trainer sample from a policy it does
not serve ("A worker reports the last version declared to it, not the weights loaded in its GPU
memory", upstream's integration reference), and its generations must not name that version
either: a trainer stamps its samples from them. A stream the crash cut must not look finished: it
ends in an error, or it is migrated to another worker and completes; a clean terminal short of
what it asked for would be admitted as a whole sample.
"""

from __future__ import annotations

from typing import Any

from .base import Findings, Violation, check
from .terminal import Ending

SECTION = "Coordinate Policy Refresh"
SPEC = (
    "Keep generation gated when membership changes, an update fails, cache reset fails, or "
    "post-update generation does not pass."
)


@check(
    "refresh.recovered_version",
    title="a worker whose engine was restarted does not report the version applied before",
    spec=SPEC,
    section=SECTION,
)
def recovered_version(applied: Any, reported: Any, worker: str) -> Findings:
    """`applied`: the version the worker was updated to before its engine died; `reported`:
    what it reports once restarted (nothing re-applied)."""
    if type(reported) is type(applied) and reported == applied:
        yield Violation(
            f"{worker} reports {applied!r} after its engine restarted on its starting weights: "
            "the version was not re-applied",
            "version",
            f"anything but {applied!r} (nothing declared, or the starting version)",
            reported,
        )


@check(
    "refresh.recovered_sample_version",
    title="a generation of a worker whose engine was restarted does not name the version applied "
    "before",
    spec=SPEC,
    section=SECTION,
)
def recovered_sample_version(applied: Any, named: Any, worker: str) -> Findings:
    """`applied`: the version the worker was updated to before its engine died; `named`: the
    version a generation it served afterwards names (`nvext.engine_data.weight_version`):
    the samples a trainer stamps from it, which the worker's version route does not show."""
    if type(named) is type(applied) and named == applied:
        yield Violation(
            f"a generation of {worker} names {applied!r} after its engine restarted on its "
            "starting weights: its samples look fresher than they are",
            "nvext.engine_data.weight_version",
            f"anything but {applied!r} (nothing declared, or the starting version)",
            named,
        )


@check(
    "refresh.crashed_stream_not_clean",
    title="a stream whose engine died ends in an error or completes elsewhere, never clean and "
    "short",
    spec=SPEC,
    section=SECTION,
)
def crashed_stream_not_clean(state: str, ending: Ending, max_tokens: int) -> Findings:
    """`state`: the stream's terminal state (`success` when it ended with its terminal chunk and
    `[DONE]`); `ending`: its first choice's ending, folded from its events."""
    if state != "success":
        return
    ids = ending.completion_ids
    if ids is not None and len(ids) >= max_tokens:
        return  # migrated and completed
    got = "an unknown number of" if ids is None else f"{len(ids)} of {max_tokens}"
    yield Violation(
        f"{ending.where}: the stream ended cleanly (finish {ending.finish_reason!r}) after {got} "
        "ids although its engine died under it",
        f"{ending.where}.finish_reason",
        "an error event, a failed stream, or all the ids asked for (migrated)",
        ending.finish_reason,
    )
