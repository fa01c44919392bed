"""The adapter checklist: what `rl-conformance certify-adapter` judges an RL framework's rollout
client on, each item declared once (id, title, level, section, the spec's sentence, the half of
the protocol it is about, what would exercise it).

Its judge in `rl_conformance/certify/` is registered on the item (`findings.judges(ITEM)`) and
takes its id from it; the runner's adapter matrix, the checklist's halves and the scenarios that
stage an item's event all name the item, never its id again. These are the rows of the adapter
matrix, not of the deployment's (`contract.AREAS`)."""

from __future__ import annotations

from .kinds import (
    CHECKLIST,
    DISCOVERY,
    REFRESH,
    STREAM,
    TOKENS,
    ChecklistItem,
    Half,
    item,
)

GENERATION_REACHES_BACKEND = item(
    "adapter.generation_reaches_backend",
    "Rollouts on a healthy fleet reach the frontend and yield samples",
    CHECKLIST,
    "Generation reaches the intended Dynamo frontend and backend.",
    Half.GENERATION,
    exercised_by="a rollout the trainer drives on a healthy fleet",
)

VERIFIED_TERMINAL_ONLY = item(
    "adapter.verified_terminal_only",
    "Only verified terminal results are admitted",
    STREAM,
    "Admit only a verified terminal result.",
    Half.GENERATION,
    exercised_by="a sample admitted from a reply the kit can trace to the request it came from "
    "(its attempt_id the x-request-id sent, or one reply of its rollout carrying its ids), or a "
    "rollout the trainer cancels",
)

SINGLE_ADMISSION = item(
    "adapter.single_admission",
    "No sample is admitted twice",
    CHECKLIST,
    "Retries and cancellations cannot admit the same sample twice.",
    Half.GENERATION,
    exercised_by="a sample admitted to training",
)

ATTEMPT_IDENTITY = item(
    "adapter.attempt_identity",
    "Retries preserve attempt identity",
    STREAM,
    "Preserve attempt identity when retrying, because a timed-out request may have completed "
    "after the client stopped waiting and generation is not idempotent.",
    Half.GENERATION,
    exercised_by="a generation request sent to the frontend",
)

ENGINE_TOKEN_IDS = item(
    "adapter.engine_token_ids",
    "Token ids come from the engine",
    TOKENS,
    "Do not reconstruct it by tokenizing generated text",
    Half.GENERATION,
    exercised_by="a sample admitted from a verified reply the kit can trace to the request it "
    "came from (its attempt_id the x-request-id sent, or one reply of its rollout carrying its "
    "ids)",
)

LOGPROB_ALIGNMENT = item(
    "adapter.logprob_alignment",
    "Logprobs stay aligned with token ids",
    TOKENS,
    "Selected log probabilities match those token IDs in length and order. Prompt log "
    "probabilities preserve undefined positions instead of shifting alignment.",
    Half.GENERATION,
    exercised_by="a sample admitted from a verified reply the kit can trace to the request it "
    "came from",
)

DISCOVERY_BEFORE_CONTROL = item(
    "adapter.discovery_before_control",
    "Discovery is re-read before each control phase",
    DISCOVERY,
    "Refresh discovery before each control phase and require the complete capability set for "
    "the selected update path. Do not cache membership indefinitely or interpret list position "
    "as worker identity.",
    Half.REFRESH,
    exercised_by="a refresh that enters a control phase",
)

MUTATIONS_TO_ADVERTISED = item(
    "adapter.mutations_to_advertised",
    "Mutations go only to advertised system URLs of selected workers",
    CHECKLIST,
    "Mutating calls use direct worker URLs on a trusted network.",
    Half.REFRESH,
    exercised_by="a refresh that sends a mutating call to a worker",
)

GATED_AFTER_FAILURE = item(
    "adapter.gated_after_failure",
    "Generation stays gated after a failed refresh",
    REFRESH,
    "Keep generation gated when membership changes, an update fails, cache reset fails, or "
    "post-update generation does not pass.",
    Half.REFRESH,
    exercised_by="a refresh that cannot succeed, met by a client that calls the fleet and "
    "generates while it is open",
)

COMPLETE_ITERATION = item(
    "adapter.complete_iteration",
    "One iteration includes refresh and post-update generation",
    CHECKLIST,
    "One complete training iteration includes policy refresh and post-update generation.",
    Half.REFRESH,
    exercised_by="a refresh that can complete",
)

ONE_POLICY_SAMPLES = item(
    "adapter.one_policy_samples",
    "A sample generated across a refresh is not named one policy's",
    STREAM,
    "The framework owns retry policy, duplicate suppression, partial-rollout handling, and "
    "sample acceptance.",
    Half.GENERATION,
    exercised_by="a sample whose tokens straddle a refresh",
)

ITEMS: tuple[ChecklistItem, ...] = (
    GENERATION_REACHES_BACKEND,
    VERIFIED_TERMINAL_ONLY,
    SINGLE_ADMISSION,
    ATTEMPT_IDENTITY,
    ENGINE_TOKEN_IDS,
    LOGPROB_ALIGNMENT,
    DISCOVERY_BEFORE_CONTROL,
    MUTATIONS_TO_ADVERTISED,
    GATED_AFTER_FAILURE,
    COMPLETE_ITERATION,
    ONE_POLICY_SAMPLES,
)
"""The checklist in the order the adapter matrix shows it."""

BY_ID: dict[str, ChecklistItem] = {found.id: found for found in ITEMS}
