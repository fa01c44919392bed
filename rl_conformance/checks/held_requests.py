"""Requests a caller asked to keep across a control step, and the steps taken while they are held.

A trainer that pauses in a mode that keeps its requests (SGLang's `retract`, which returns the
running requests to the waiting queue, vLLM's `keep`) and then publishes a version or resets the
cache has asked for two things at once: the requests survive, and the step does what it names.
RL frameworks have met each half broken:

- after a `retract` pause, a cache reset that answers success but flushes nothing leaves stale
  prefixes behind a reset the caller was told succeeded (`PauseGenerationReqInput`: "The KV
  cache can be flushed in this mode and will be automatically recomputed after
  continue_generation", python/sglang/srt/managers/io_struct.py). A reset that is refused
  (any non-2xx, or `success: false`) is legal: SGLang's cache reset "rejects active requests",
  and a refused reset is one the spec has the trainer stay gated on, not a violation;
- `update_weight_version` aborts the requests in flight unless told `abort_all_requests: false`
  (its default is true); a caller that said false and still lost them lost samples the pause
  took care to keep. Aborting is legal by the spec ("`update_weight_version` changes metadata
  and can abort requests"), so only a rename that asked to keep them is judged;
- a version published while a request is held is the one its later tokens are named under
  (SGLang's per-span `meta_info.weight_versions`); where the rename does not reach the
  scheduler that keeps that record, nothing in the spec is broken: a release difference.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import MISSING, RELEASE_BEHAVIOUR, Findings, Violation, check, get_path

REFRESH = "Coordinate Policy Refresh"
ADMIN = "Compare vLLM and SGLang Administration"
FLUSH_SPEC = (
    'Invalidate stale KV state. (The cache reset "rejects active requests", and a trainer '
    "keeps generation gated when cache reset fails: a refused reset is legal, one that answers "
    'success must have reset. Upstream: after a `retract` pause "the KV cache can be flushed '
    'in this mode and will be automatically recomputed after continue_generation", '
    "PauseGenerationReqInput, python/sglang/srt/managers/io_struct.py.)"
)
RENAME_SPEC = (
    "`update_weight_version` changes metadata and can abort requests; it does not replace "
    "tensors. (Upstream: UpdateWeightVersionReqInput.abort_all_requests, default true, "
    "python/sglang/srt/managers/io_struct.py: a caller that sends false keeps them.)"
)
ABORTED_FINISHES = frozenset({"abort", "cancelled", "canceled"})


def flush_refusal(status: int, body: Any) -> str | None:
    """What a cache reset that refused answered (a non-2xx status, or `success: false`), None
    when it answered success."""
    if not 200 <= status < 300:
        said = body.get("message") if isinstance(body, Mapping) else body
        return f"HTTP {status} ({str(said)[:200]!r})"
    if isinstance(body, Mapping) and body.get("success") is False:
        return f"success false ({str(body.get('message'))[:200]!r})"
    return None


@check(
    "refresh.flush_after_retract",
    title="a cache flush after a retract pause that answers success invalidates the cached "
    "prefixes",
    spec=FLUSH_SPEC,
    section=REFRESH,
)
def flush_after_retract(
    status: int, body: Any, cached_before: int, cached_after: int, worker: str
) -> Findings:
    """`status`, `body`: the flush route's answer on `worker`, paused in `retract` mode with
    requests retracted to its queue; `cached_before`, `cached_after`: the cached prefix a
    repeated prompt reported before the pause and after the resume. A refused flush is not
    judged here (`flush_refusal`: the suite reports it)."""
    if flush_refusal(status, body) is None and cached_after != 0:
        yield Violation(
            f"{worker}: the cache flush after a retract pause answered success, but the cached "
            f"prefix is still reused ({cached_before} tokens cached before it, {cached_after} "
            "after): stale prefixes survive a reset the caller was told succeeded",
            "usage.prompt_tokens_details.cached_tokens",
            0,
            cached_after,
        )


def finish_type(finish_reason: Any) -> Any:
    """A finish reason as a name: OpenAI's string, or SGLang's native `{"type": ...}`."""
    if isinstance(finish_reason, Mapping):
        return finish_reason.get("type")
    return finish_reason


@check(
    "refresh.rename_keeps_requests",
    title="a version rename that asked to keep the requests in flight keeps them",
    spec=RENAME_SPEC,
    section=ADMIN,
)
def rename_keeps_requests(
    delivered: int | None, max_tokens: int, finish_reason: Any, where: str
) -> Findings:
    """`delivered`: the ids the stream returned (None when unknown); `finish_reason`: its
    choice's, as sent. It asked for `max_tokens` with EOS ignored, so kept, it ends by its
    length."""
    name = finish_type(finish_reason)
    if isinstance(name, str) and name.lower() in ABORTED_FINISHES:
        yield Violation(
            f"{where}: the stream was aborted (finish {name!r}) by a version rename that sent "
            "abort_all_requests false",
            f"{where}.finish_reason",
            "length (the request kept, run to its end)",
            finish_reason,
        )
    elif delivered is not None and delivered < max_tokens:
        yield Violation(
            f"{where}: the stream ended after {delivered} of {max_tokens} ids across a version "
            "rename that sent abort_all_requests false",
            f"{where}.completion_token_ids",
            f"{max_tokens} ids",
            delivered,
        )


@check(
    "refresh.rename_reaches_token_versions",
    title="a version published by update_weight_version is the one the per-token record names",
    spec="No sentence of the spec fixes per-token weight versions. SGLang names a version per "
    "output span (`meta_info.weight_versions`), kept by its scheduler "
    "(`record_weight_version_change`, python/sglang/srt/managers/scheduler.py); Dynamo 1.6.1's "
    "and 1.7.0.dev20261026's control/update_weight_version hands the version to SGLang's "
    "tokenizer manager only (`update_weight_version` in "
    "dynamo/sglang/request_handlers/handler_base.py), so the spans keep the scheduler's "
    "version: renamed after launch, a stream's first span says 'default' "
    "(fixtures/releases/1.6.1+sglang-0.5.21/weight_versions_held_stream_generate.json, "
    "fixtures/releases/1.7.0.dev20261026+sglang-0.5.23/weight_versions_held_stream_generate.json)"
    ". A deployment whose rename does not reach that record is flagged, not failed.",
    section=RELEASE_BEHAVIOUR,
    normative=False,
)
def rename_reaches_token_versions(record: Any, renamed: tuple[Any, ...]) -> Findings:
    """`record`: the last event's `meta_info.weight_versions` (MISSING when no event carried
    it), else the versions the events name; `renamed`: the versions the renames published. A
    record that names none of them does not follow renames: the tokens' versions across one
    cannot be judged."""
    if record is MISSING:
        return
    spans = record if isinstance(record, list) else [{"version": record}]
    named = [get_path(span, "version") for span in spans]
    if named and not any(version in renamed for version in named):
        yield Violation(
            f"the per-token record names {named!r}, none of the versions published by "
            f"update_weight_version ({list(renamed)!r}): the rename does not reach it",
            "meta_info.weight_versions",
            list(renamed),
            named,
        )
