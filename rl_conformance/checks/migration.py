"""A stream whose worker died under it, on a frontend that migrates requests (`--migration-limit`
above 0): Dynamo continues it on another worker "from the exact point of failure — no tokens lost
or duplicated, and no interruption visible to the client" (Dynamo's request migration guide).

A trainer admits the spliced stream as one sample: it must read as the same stream run unbroken
does (its ids where the deployment is deterministic: two unbroken runs agree; its logprobs; its
usage's completion count). What the unbroken stream already gets wrong is the stream rows' to
judge, not the splice's. Dynamo 1.6.1 itself reports the re-prefilled
tokens in `usage.prompt_tokens` and only the second worker's ids in `nvext.engine_data` (recorded:
`fixtures/dynamo-1.6.1/toy-worker/migration_worker_killed_stream.json`); neither is a field the
contract names for the trainer, so both are measured, never judged here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import contract
from .aggregate import aggregate_stream
from .base import Findings, Violation, check, get_path


@dataclass(frozen=True)
class Spliced:
    """What the client read of a stream its worker died under, folded."""

    state: str
    """The stream's terminal state (`success`: its terminal chunk and `[DONE]`)."""
    error: str | None
    """The error event or failure that ended it, if any."""
    finish_reason: Any
    ids: Sequence[int] | None
    """`nvext.completion_token_ids` across its chunks (None: the deployment sent none)."""
    logprobs: int | None
    """Selected logprobs it carried (None: none were asked for or sent)."""
    usage_completion_tokens: Any
    max_tokens: int
    read_before_kill: int
    """Ids the client had read when the worker was killed."""


def spliced(
    payloads: list[Any],
    state: str,
    error: str | None,
    max_tokens: int,
    read_before_kill: int,
) -> tuple[Spliced, dict[str, Any]]:
    """A stream's events folded as `continuity` reads them, and what is measured beside them
    (`usage.prompt_tokens`, the ids `nvext.engine_data` carries)."""
    merged = aggregate_stream(payloads)
    ids = get_path(merged, "nvext", "completion_token_ids")
    selected = get_path(merged, "choices", 0, "logprobs", "token_logprobs")
    engine_ids = get_path(merged, "nvext", "engine_data", "completion_token_ids")
    errors = [p["error"] for p in payloads if isinstance(p, dict) and "error" in p]
    folded = Spliced(
        state=state,
        error=error or (str(errors[0]) if errors else None),
        finish_reason=get_path(merged, "choices", 0, "finish_reason"),
        ids=ids if isinstance(ids, list) else None,
        logprobs=len(selected) if isinstance(selected, list) else None,
        usage_completion_tokens=get_path(merged, "usage", "completion_tokens"),
        max_tokens=max_tokens,
        read_before_kill=read_before_kill,
    )
    prompt_tokens = get_path(merged, "usage", "prompt_tokens")
    seen = {
        "prompt_tokens": prompt_tokens if isinstance(prompt_tokens, int) else None,
        "engine_data_ids": len(engine_ids) if isinstance(engine_ids, list) else None,
    }
    return folded, seen


@check(contract.migration.CONTINUITY)
def continuity(
    stream: Spliced, unbroken: Spliced, migration_limit: int, deterministic: bool = True
) -> Findings:
    """`unbroken`: the same stream run without a kill, which ended in terminal success with
    every id asked for (`reference_problem`: a deployment whose unbroken streams do not is
    judged by the stream rows, not here). The migrated stream must read as it does: its ids
    (compared one by one where the deployment is `deterministic`, two unbroken runs agreeing;
    by count otherwise), its logprobs and its usage's completion count; whatever the splice
    changes is the splice's."""
    if stream.state != "success" or stream.error is not None:
        yield Violation(
            f"the stream ended {stream.state!r} ({stream.error or 'no terminal success'}) after "
            f"its worker was killed, {stream.read_before_kill} ids in, although the frontend "
            f"runs with --migration-limit {migration_limit} and the same stream unbroken ends "
            "in success: it was not continued elsewhere",
            "stream",
            "terminal success with every id asked for (migrated)",
            stream.error or stream.state,
        )
        return
    ids = stream.ids
    if ids is None:
        yield Violation(
            "the migrated stream carried no nvext.completion_token_ids where the same stream "
            "unbroken carries them",
            "nvext.completion_token_ids",
            f"{stream.max_tokens} ids",
            None,
        )
        return
    if len(ids) != stream.max_tokens:
        yield Violation(
            f"the migrated stream carried {len(ids)} ids for max_tokens {stream.max_tokens} "
            "(EOS ignored; the same stream unbroken carries them all): ids were lost or "
            "repeated at the splice",
            "nvext.completion_token_ids",
            stream.max_tokens,
            len(ids),
        )
    reference = unbroken.ids or []
    if deterministic and list(ids) != list(reference):
        at = next(
            (k for k, (a, b) in enumerate(zip(ids, reference, strict=False)) if a != b),
            min(len(ids), len(reference)),
        )
        window = slice(max(0, at - 2), at + 3)
        yield Violation(
            f"the migrated stream's ids differ from the same stream's unbroken ids from "
            f"position {at} (the worker was killed {stream.read_before_kill} ids in): "
            f"{list(ids[window])} against {list(reference[window])}",
            f"nvext.completion_token_ids[{at}]",
            reference[at] if at < len(reference) else "end of stream",
            ids[at] if at < len(ids) else "end of stream",
        )
    if stream.logprobs != unbroken.logprobs:
        yield Violation(
            f"the migrated stream carried {stream.logprobs} selected logprobs where the same "
            f"stream unbroken carries {unbroken.logprobs}",
            "choices[0].logprobs.token_logprobs",
            unbroken.logprobs,
            stream.logprobs,
        )
    if stream.usage_completion_tokens != unbroken.usage_completion_tokens:
        yield Violation(
            f"the migrated stream's usage counts {stream.usage_completion_tokens!r} completion "
            f"tokens where the same stream unbroken counts {unbroken.usage_completion_tokens!r}",
            "usage.completion_tokens",
            unbroken.usage_completion_tokens,
            stream.usage_completion_tokens,
        )


def reference_problem(unbroken: Spliced) -> str | None:
    """Why an unbroken run of the stream cannot be the reference (None: it can): it did not
    end in terminal success with every id asked for, or named none."""
    if unbroken.state != "success" or unbroken.error is not None:
        return f"ends {unbroken.state!r} ({unbroken.error or 'no terminal success'})"
    if unbroken.ids is None:
        return "carries no nvext.completion_token_ids"
    if len(unbroken.ids) != unbroken.max_tokens:
        return f"carries {len(unbroken.ids)} ids for max_tokens {unbroken.max_tokens}"
    return None
