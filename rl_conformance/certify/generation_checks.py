"""The checklist items about what a rollout client sends and admits (attempt identity, token
ids, logprobs, verified terminal replies, one admission per slot), each judged by a pure function
of one scenario's evidence. Those about the refresh are `refresh_checks`; about a healthy fleet's
rollouts, `rollouts`; about samples straddling a refresh, `overlap`.

No item passes on zero observations (a client that sends nothing, admits nothing or refreshes
nothing passes nothing): it is never exercised, naming why.
"""

from __future__ import annotations

from ..contract import adapter
from .evidence import Evidence, no_generation, source_of, sources_of
from .findings import Ruling, failed, judges, never_exercised, passed
from .protocol import Sample
from .replies import (
    asks_engine_ids,
    engine_ids,
    engine_logprobs,
    is_native,
    logprobs_match,
    prompt_ids,
    raw_payload_hazard,
    selected_logprobs,
    verified_terminal,
)
from .scenarios import Generate


@judges(adapter.VERIFIED_TERMINAL_ONLY)
def verified_terminal_only(evidence: Evidence) -> Ruling:
    if not evidence.admissions:
        return never_exercised("no sample was admitted in this scenario")
    traced = 0
    for admission in evidence.admissions:
        if not sources_of(evidence, admission):
            return failed(
                "an admitted sample names no request the adapter sent",
                "attempt_id equal to the x-request-id of the request it came from",
                admission.sample.attempt_id,
            )
        record = source_of(evidence, admission)
        if record is None:
            continue
        traced += 1
        if not verified_terminal(record):
            return failed(
                "admitted a sample whose response was not a verified terminal success: "
                + record.summary(),
                "status 200, the whole stream delivered, a stop/length finish, then [DONE]",
                {
                    "status": record.status,
                    "delivery": record.delivery,
                    "events": len(record.events),
                },
            )
    cancelled = [s for s in evidence.generate_steps() if s.cancelled]
    for step in cancelled:
        if any(a.step == step.index for a in evidence.admissions):
            return failed(
                f"admitted a sample for slot {step.label}, which the trainer cancelled",
                "nothing admitted for a cancelled rollout",
                "a sample",
            )
    if not traced and not cancelled:
        return never_exercised(
            f"none of the {len(evidence.admissions)} admitted sample(s) could be traced to one "
            "request (several replies, or none, carry its identity or its ids), and no rollout "
            "was cancelled",
        )
    judged = (
        [f"{traced} admitted sample(s), each from a verified terminal response"] if traced else []
    )
    if cancelled:
        judged.append(f"nothing admitted for the {len(cancelled)} cancelled rollout(s)")
    return passed("; ".join(judged))


@judges(adapter.SINGLE_ADMISSION)
def single_admission(evidence: Evidence) -> Ruling:
    if not evidence.admissions:
        return never_exercised("no sample was admitted in this scenario")
    per_slot: dict[int, int] = {}
    for admission in evidence.admissions:
        per_slot[admission.step] = per_slot.get(admission.step, 0) + 1
    for index, count in per_slot.items():
        if count > 1:
            label = evidence.steps[index].label
            return failed(f"slot {label} admitted {count} samples", "at most one", count)
    return passed(f"{len(per_slot)} slot(s), one admission each")


@judges(adapter.ATTEMPT_IDENTITY)
def attempt_identity(evidence: Evidence) -> Ruling:
    generations = [r for r in evidence.records if r.is_generation]
    if not generations:
        return never_exercised(no_generation(evidence))
    ids = [r.headers.get("x-request-id") for r in generations]
    if any(not i for i in ids):
        missing = next(r for r in generations if not r.headers.get("x-request-id"))
        return failed(
            f"a generation carries no attempt identity: {missing.summary()}",
            "an x-request-id header on every attempt",
            None,
        )
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        slots = _slots_sent_under(evidence, repeated[0])
        if len(slots) > 1:
            return failed(
                f"rollouts {' and '.join(slots)} (each a generation of its own, as the turns of a "
                "trajectory are) were sent under one identity: a late completion of one cannot "
                "be told from the other",
                "a distinct x-request-id per generation request",
                repeated,
            )
        return failed(
            "two attempts carry the same identity: a late completion of the first cannot be told "
            "from the retry",
            "a distinct x-request-id per attempt",
            repeated,
        )
    retried = len(generations) > len(evidence.generate_steps()) + len(evidence.refresh_steps())
    return passed(
        f"{len(generations)} attempt(s), each with its own identity"
        + (" (retries seen)" if retried else ""),
    )


def _slots_sent_under(evidence: Evidence, identity: str) -> list[str]:
    """The rollouts whose requests carried `identity`, in order."""
    return [
        step.label
        for step in evidence.generate_steps()
        if any(
            r.is_generation and r.headers.get("x-request-id") == identity
            for r in evidence.within(step)
        )
    ]


@judges(adapter.ENGINE_TOKEN_IDS)
def engine_token_ids(evidence: Evidence) -> Ruling:
    generations = [r for r in evidence.records if r.is_generation]
    if not generations:
        return never_exercised(no_generation(evidence))
    for record in generations:
        body = record.body if isinstance(record.body, dict) else {}
        prompt = prompt_ids(record)
        if not (isinstance(prompt, list) and all(isinstance(t, int) for t in prompt)):
            return failed(
                f"the prompt was not sent as token ids: {record.summary()}",
                "prompt (chat: nvext.token_data; native /generate: input_ids) as a list of "
                "token ids",
                type(prompt).__name__,
            )
        if not is_native(record) and not asks_engine_ids(body):
            return failed(
                "generated token ids were not requested from the engine: " + record.summary(),
                'nvext.extra_fields containing "completion_token_ids" (or "engine_data"), or '
                "return_tokens_as_token_ids true with logprobs (each token spelled token_id:N)",
                {
                    key: body[key]
                    for key in ("nvext", "return_tokens_as_token_ids", "logprobs")
                    if key in body
                },
            )
    traced = 0
    for admission in evidence.admissions:
        record = source_of(evidence, admission)
        if record is None or not verified_terminal(record):
            continue  # judged by attempt_identity / verified_terminal_only
        traced += 1
        engine = engine_ids(record)
        if engine is None:
            return failed(
                "admitted a sample although its reply carried no engine-returned ids "
                f"({record.summary()}): its ids were made some other way"
                + raw_payload_hazard(record),
                "no sample admitted from a reply without the engine's ids",
                list(admission.sample.token_ids),
            )
        if tuple(engine) != admission.sample.token_ids:
            return failed(
                "an admitted sample's token ids are not the engine's",
                engine,
                list(admission.sample.token_ids),
            )
        if tuple(prompt_ids(record) or ()) != admission.sample.prompt_ids:
            return failed(
                "an admitted sample's prompt ids are not those sent",
                prompt_ids(record),
                list(admission.sample.prompt_ids),
            )
    drifted = history_drift(evidence)
    if drifted is not None:
        return drifted
    if not traced:
        return never_exercised(
            f"{len(generations)} prompt(s) sent as ids and the engine's ids requested, but no "
            "admitted sample could be traced to a verified reply to compare its ids with"
            + ("" if evidence.admissions else " (none was admitted)"),
        )
    return passed(
        f"{len(generations)} prompt(s) sent as ids, the engine's ids requested; {traced} admitted "
        "sample(s) traced to a verified reply, each with the engine's ids",
    )


@judges(adapter.LOGPROB_ALIGNMENT)
def logprob_alignment(evidence: Evidence) -> Ruling:
    if not evidence.admissions:
        return never_exercised("no sample was admitted in this scenario")
    traced = 0
    for admission in evidence.admissions:
        sample = admission.sample
        record = source_of(evidence, admission)
        if record is None or not verified_terminal(record):
            continue  # judged by attempt_identity / verified_terminal_only
        traced += 1
        if any(value is None for value in sample.logprobs):
            return failed(
                "admitted a sample with no logprob for a generated token: it cannot be verified "
                f"({record.summary()})",
                "a number for every generated token, the engine's",
                list(sample.logprobs),
            )
        if len(sample.logprobs) != len(sample.token_ids) or not logprobs_match(
            list(sample.logprobs), record
        ):
            return failed(
                "admitted logprobs are not the engine's, one per token (compared exactly with "
                "nvext.engine_data.completion_logprobs, at float32 with the OpenAI field)",
                engine_logprobs(record) or selected_logprobs(record),
                list(sample.logprobs),
            )
        if sample.prompt_logprobs is not None and len(sample.prompt_logprobs) != len(
            sample.prompt_ids
        ):
            return failed(
                "prompt logprobs lost their alignment with the prompt (undefined positions "
                "dropped?)",
                f"{len(sample.prompt_ids)} entries, None where undefined",
                list(sample.prompt_logprobs),
            )
    if not traced:
        return never_exercised(
            f"none of the {len(evidence.admissions)} admitted sample(s) could be traced to a "
            "verified reply to compare its logprobs with",
        )
    return passed(
        f"{traced} admitted sample(s): logprobs are the engine's (at the precision of the field "
        "they came from), aligned with ids and prompt",
    )


def history_drift(evidence: Evidence) -> Ruling | None:
    """A later turn of a trajectory whose admitted prompt does not begin with the turn before's
    prompt and the ids the engine generated for it: the history was tokenized again (from its
    text, or through a chat template), so the ids trained on are not the ones the engine saw
    (THUDM/slime #117, huggingface/trl #5224). None when every turn extends the one before."""
    trajectory_of = {
        planned.slot: planned.trajectory
        for planned in evidence.scenario.steps
        if isinstance(planned, Generate) and planned.trajectory is not None
    }
    last: dict[str, Sample] = {}
    for admission in sorted(evidence.admissions, key=lambda a: a.step):
        if admission.step >= len(evidence.steps):
            continue
        trajectory = trajectory_of.get(evidence.steps[admission.step].label)
        if trajectory is None:
            continue
        before = last.get(trajectory)
        sample = admission.sample
        if before is not None:
            history = (*before.prompt_ids, *before.token_ids)
            if tuple(sample.prompt_ids[: len(history)]) != history:
                return failed(
                    f"a later turn of trajectory {trajectory!r} was sent a prompt that does not "
                    "begin with the turn before's prompt and the ids the engine generated for "
                    "it: the history was tokenized again",
                    list(history),
                    list(sample.prompt_ids[: len(history)]),
                )
        last[trajectory] = sample
    return None
