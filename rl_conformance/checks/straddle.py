"""A sample generated across a weight update, held to what the deployment says about it.

A request paused in place (vLLM `keep`, SGLang `in_place`) while its worker loads new weights
resumes under them: its first tokens come from one policy, the rest from another. A trainer that
admits it as a one-policy sample computes importance ratios against the wrong behaviour policy,
so RL clients that care record a version per span (SGLang's `meta_info.weight_versions`
`[{version, start, end}]`, read by slime-style `Sample.weight_versions`; vLLM 0.34's
`return_weight_versions`). SGLang (`python/sglang/srt/utils/weight_versions.py`) records, at each
update, how many tokens every running request had produced under the old version; the spans split
there, and the scalar `weight_version` is the newest span's. Where the deployment names versions
per event or per span, they must be true of the tokens:

- every version named is the one before the update or the one after it;
- an event the client had read before the update was sent carries tokens of the old weights, so
  it names the old version, and spans put those tokens under the old version;
- versions never go back from the new to the old;
- spans cover the output exactly once, in order: `[0, n)` with no gap or overlap;
- an event's `weight_version` is its newest span's version.

What cannot be known without racing the engine is where the new version begins: tokens read
after the update may still have been generated before it. So a deployment whose every span says
old is not failed; the measurement says whether the straddle was shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import contract
from .base import MISSING, Findings, Violation, check, get_path, is_int_list


@dataclass(frozen=True)
class EventVersion:
    """One event of the stream: tokens delivered up to it, the version it names, and whether the
    client had read it before the update was sent."""

    tokens: int
    version: Any
    before_update: bool
    newest_span: Any = MISSING
    """The version of the event's own last span, when it carries spans."""


@dataclass(frozen=True)
class VersionTrail:
    """What a stream said about the weights behind its tokens."""

    events: tuple[EventVersion, ...]
    spans: Any
    """The last event's `meta_info.weight_versions` (MISSING when no event carried it)."""
    tokens: int
    known_old: int
    """Tokens the client had read before the update was sent: certainly the old weights'."""

    @property
    def names_versions(self) -> bool:
        return self.spans is not MISSING or any(e.version is not MISSING for e in self.events)

    def versions_named(self) -> list[Any]:
        """The distinct versions named, in order of first appearance."""
        named: list[Any] = []
        candidates = [e.version for e in self.events]
        if isinstance(self.spans, list):
            candidates += [get_path(span, "version") for span in self.spans]
        for version in candidates:
            if version is not MISSING and version not in named:
                named.append(version)
        return named


def native_counts(events: Sequence[Any]) -> list[int]:
    """Output tokens delivered up to each event of a native SGLang stream. SGLang's events carry
    cumulative `output_ids`, Dynamo 1.6.1's carry deltas (`fixtures/KNOWN_DIFFERENCES.md`): the
    whole stream decides which, as `tokens.native_sequence` does."""
    lists = [get_path(event, "output_ids") for event in events]
    present = [ids for ids in lists if is_int_list(ids)]
    cumulative = len(present) > 1 and all(
        present[k][: len(present[k - 1])] == present[k - 1] for k in range(1, len(present))
    )
    counts: list[int] = []
    total = 0
    for ids in lists:
        if is_int_list(ids):
            total = len(ids) if cumulative else total + len(ids)
        counts.append(total)
    return counts


def trail_from_native_events(events: Sequence[Any], read_before_update: int) -> VersionTrail:
    """The trail of a native SGLang stream whose first `read_before_update` events the client had
    read when it sent the update."""
    payloads = [event for event in events if isinstance(event, dict)]
    counts = native_counts(payloads)
    trail = tuple(
        EventVersion(
            tokens=count,
            version=get_path(payload, "meta_info", "weight_version"),
            before_update=position < read_before_update,
            newest_span=get_path(payload, "meta_info", "weight_versions", -1, "version"),
        )
        for position, (payload, count) in enumerate(zip(payloads, counts, strict=True))
    )
    spans: Any = MISSING
    for payload in reversed(payloads):
        spans = get_path(payload, "meta_info", "weight_versions")
        if spans is not MISSING:
            break
    known_old = max((e.tokens for e in trail if e.before_update), default=0)
    return VersionTrail(trail, spans, counts[-1] if counts else 0, known_old)


def first_token_of(trail: VersionTrail, version: Any) -> int | None:
    """The output position where `version` begins: its first span's start, else the token
    count before the first event naming it (None when nothing names it). Measured, not judged:
    which tokens the client had read by the update depends on the link's pace."""
    if isinstance(trail.spans, list):
        for span in trail.spans:
            if get_path(span, "version") == version and type(get_path(span, "start")) is int:
                return int(span["start"])
    before = 0
    for event in trail.events:
        if event.version == version:
            return before
        before = event.tokens
    return None


def _events(trail: VersionTrail, old: Any, new: Any) -> Findings:
    went_new = False
    for position, event in enumerate(trail.events):
        version = event.version
        if version is MISSING:
            continue
        where = f"events[{position}].meta_info.weight_version"
        if version not in (old, new):
            yield Violation(
                f"{where}: names {version!r}, neither the version before the update nor after",
                where,
                f"{old!r} or {new!r}",
                version,
            )
        elif event.before_update and version != old:
            yield Violation(
                f"{where}: read before the update was sent, yet names the new version",
                where,
                old,
                version,
            )
        elif went_new and version == old:
            yield Violation(
                f"{where}: goes back to the old version after an event named the new one",
                where,
                new,
                version,
            )
        elif event.newest_span is not MISSING and version != event.newest_span:
            yield Violation(
                f"{where}: names {version!r}, but the event's newest span is "
                f"{event.newest_span!r} (SGLang's scalar version is its newest span's)",
                where,
                event.newest_span,
                version,
            )
        went_new = went_new or version == new


def _span_shape(spans: Any, tokens: int) -> Findings:
    where = "meta_info.weight_versions"
    if not isinstance(spans, list):
        yield Violation(f"{where}: not a list of spans", where, "[{version, start, end}]", spans)
        return
    at = 0
    for index, span in enumerate(spans):
        start, end = get_path(span, "start"), get_path(span, "end")
        if not (type(start) is int and type(end) is int and start < end):
            yield Violation(
                f"{where}[{index}]: not a non-empty [start, end) span of output positions",
                f"{where}[{index}]",
                "{version, start < end}",
                span,
            )
            return
        if start != at:
            yield Violation(
                f"{where}[{index}]: starts at output position {start}, "
                f"the previous span ended at {at}",
                f"{where}[{index}].start",
                at,
                start,
            )
            return
        at = end
    if at != tokens:
        yield Violation(
            f"{where}: the spans cover {at} output tokens, the stream delivered {tokens}",
            where,
            tokens,
            at,
        )


def _spans(trail: VersionTrail, old: Any, new: Any) -> Findings:
    spans = trail.spans
    if spans is MISSING:
        return
    shape = list(_span_shape(spans, trail.tokens))
    yield from shape
    if shape:
        return
    went_new = False
    for index, span in enumerate(spans):
        version, start = span.get("version"), span["start"]
        where = f"meta_info.weight_versions[{index}]"
        if version not in (old, new):
            yield Violation(
                f"{where}: names {version!r}, neither the version before the update nor after",
                f"{where}.version",
                f"{old!r} or {new!r}",
                version,
            )
        elif version != old and start < trail.known_old:
            yield Violation(
                f"{where}: puts output tokens {start}..{min(span['end'], trail.known_old) - 1} "
                f"under {version!r}, but the client had read the first {trail.known_old} tokens "
                "before the update was sent: they are the old weights'",
                f"{where}.version",
                old,
                version,
            )
        elif went_new and version == old:
            yield Violation(
                f"{where}: goes back to the old version after a span of the new one",
                f"{where}.version",
                new,
                version,
            )
        went_new = went_new or version == new


@check(contract.refresh.STRADDLE_REPORTED)
def straddle_reported(trail: VersionTrail, old: Any, new: Any) -> Findings:
    yield from _events(trail, old, new)
    yield from _spans(trail, old, new)
