"""Policy refresh, the weights served: post-update generation uses the new weights, and the policy
served after each refit is the checkpoint sent."""

from __future__ import annotations

import pytest

from rl_conformance import FeatureAbsent, MissingInput, Unobservable, contract
from rl_conformance.checks import control, served_policy
from rl_conformance.checks.served_policy import PolicyReference
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import apply_update, require_update_routes, select
from rl_conformance.control.each_worker import at_once, on_worker, pins, require_observed
from rl_conformance.control.policy_reference import ReferenceSource
from rl_conformance.control.refresh import completion_ids, pinned_generation
from rl_conformance.control.refresh_probes import (
    PROMPT,
    REFITS,
    generate_ids,
    judge_post_update_generations,
)
from rl_conformance.control.weights import WeightSource
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import Verdict

capability = pytest.mark.capability
pytestmark = pytest.mark.mutating


@capability(contract.refresh.POST_UPDATE_GENERATION)
def test_post_update_generation_uses_the_new_weights(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
) -> None:
    """Where the run does not know which checkpoint the worker held (a deployment reached by
    URL, left as an earlier run left it), an unchanged output may mean it already held the one
    sent: a second update, to a checkpoint it now surely does not hold, decides. Judged on every
    selected worker ("Verify every worker and run post-update generation"), each by a generation
    pinned to it, all of one step at once; after each update the sampled workers' generations on
    every OpenAI-compatible route, unary and streamed, are judged as any other (engine ids,
    finite log probabilities aligned with them)."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    workers = pins(chosen, every=True)
    unknown = None in rl_weights.holding(chosen.workers)

    def generated(worker: AdminWorker | None) -> tuple[list[int], object]:
        return generate_ids(rl_verdict, rl_client, rl_target, worker)

    def judge_routes() -> None:
        for worker in pins(chosen):
            judge_post_update_generations(rl_verdict, rl_client, rl_target, worker)

    before = [ids for ids, _ in at_once(generated, workers)]
    version = apply_update(rl_verdict, rl_admin, chosen, rl_weights)
    judge_routes()
    after = at_once(generated, workers)
    if unknown and any(ids == old for (ids, _), old in zip(after, before, strict=True)):
        before = [ids for ids, _ in after]
        version = apply_update(rl_verdict, rl_admin, chosen, rl_weights)
        judge_routes()
        after = at_once(generated, workers)
    for worker, old, (ids, seen) in zip(workers, before, after, strict=True):
        rl_verdict.check(on_worker(control.post_update_generation(old, ids, seen, version), worker))
    require_observed(
        chosen,
        "a worker's post-update generation on each route",
        rl_verdict,
        every_for="the output's change",
    )
    require_observed(chosen, "what a worker generates after an update", every=True)


PROBE_TOKENS = 16


def served_probe(
    rl_verdict: Verdict, rl_client: Client, rl_target: Target, worker: AdminWorker | None
) -> tuple[list[int], list[float] | None, list[float | None] | None]:
    """The served greedy ids, their log probabilities and the prompt tokens' log probabilities
    (None where the response carries none) of the fixed probe, pinned to `worker`."""
    exchange = pinned_generation(
        rl_client,
        rl_target,
        worker,
        PROMPT,
        max_tokens=PROBE_TOKENS,
        logprobs=0,
        prompt_logprobs=0,
        extra_fields=("completion_token_ids", "prompt_logprobs"),
    )
    body = rl_verdict.json(exchange)
    ids = completion_ids(exchange)
    if ids is None:
        raise FeatureAbsent("completion_token_ids unavailable on the pinned route")
    selected = ((body.get("choices") or [{}])[0].get("logprobs") or {}).get("token_logprobs")
    listed = (body.get("nvext") or {}).get("prompt_logprobs")
    prompt: list[float | None] | None = None
    if isinstance(listed, list) and len(listed) == len(PROMPT):
        prompt = [
            None if not isinstance(entry, dict) else (entry.get(str(token)) or {}).get("logprob")
            for entry, token in zip(listed, PROMPT, strict=True)
        ]
    return ids, selected if isinstance(selected, list) else None, prompt


@capability(contract.refresh.SERVED_POLICY_VERIFIED)
def test_the_served_policy_is_the_checkpoint_sent(
    rl_client: Client,
    rl_target: Target,
    rl_verdict: Verdict,
    rl_admin: AdminClient,
    rl_admin_workers: list[AdminWorker],
    rl_weights: WeightSource,
    rl_references: ReferenceSource,
) -> None:
    """After each of `REFITS` consecutive updates from checkpoints on disk (alternating between
    the given ones), the worker serves the checkpoint just sent: the greedy ids and the log
    probabilities of a fixed probe agree with what the checkpoint itself gives (computed from
    it with transformers) at the serving precision, and the checkpoints the run knows are told
    apart at that precision, so the served policy is nearer the one sent than any other. An
    update that answers success and keeps part of the old weights changes the output, so
    `refresh.post_update_generation` passes; this does not."""
    chosen = select(rl_target, rl_admin_workers, rl_admin.policy)
    require_update_routes(chosen)
    rl_weights.require(chosen.family)
    if chosen.family.update_kind != "disk":
        raise Unobservable(
            f"the served policy of a {chosen.family.name} worker: its updates are transfers, "
            "which name no checkpoint directory to compute a reference from"
        )
    known = {path: reference_of(rl_references, path) for path in rl_weights.model_paths}
    require_distinguishable(list(known.values()))
    for _ in range(REFITS):
        policy = rl_weights.new(chosen.family, chosen.workers)
        if policy.model_path is None:
            raise MissingInput(
                "the served policy needs a real checkpoint to compare with: give "
                "--update-model-path PATH twice"
            )
        reference = known.get(policy.model_path) or reference_of(rl_references, policy.model_path)
        others = [other for path, other in known.items() if path != policy.model_path]
        require_distinguishable([reference, *others])
        apply_update(rl_verdict, rl_admin, chosen, rl_weights, policy)
        workers = pins(chosen, every=True)
        probes = at_once(
            lambda worker: served_probe(rl_verdict, rl_client, rl_target, worker), workers
        )
        for worker, (ids, selected, prompt) in zip(workers, probes, strict=True):
            require_decisive(reference, others, prompt_logprobs=prompt is not None)
            rl_verdict.check(
                on_worker(
                    served_policy.served_policy(ids, selected, prompt, reference, others), worker
                )
            )
        known[policy.model_path] = reference
    require_observed(chosen, "the policy a worker serves", every=True)


def reference_of(references: ReferenceSource, path: str) -> PolicyReference:
    return references.reference(path, PROMPT, PROBE_TOKENS)


def require_decisive(
    reference: PolicyReference, others: list[PolicyReference], *, prompt_logprobs: bool
) -> None:
    """What the served probe carries must be able to tell the checkpoint sent from the others:
    without prompt log probabilities only the greedy continuation can, and at the serving
    precision its first steps may all be near-ties. Otherwise nothing was judged: never a
    pass."""
    if prompt_logprobs:
        return
    seen = served_policy.as_seen(reference, prompt_logprobs=False)
    if not served_policy.decisive(seen) or any(
        not served_policy.distinguishable(seen, served_policy.as_seen(other, False))
        for other in others
    ):
        raise Unobservable(
            "the served policy from the greedy continuation alone: the response carries no "
            "nvext.prompt_logprobs (asked with prompt_logprobs and nvext.extra_fields), and "
            "the continuation cannot tell the checkpoint sent from the others within the "
            f"{served_policy.tolerance_for(reference).stated}"
        )


def require_distinguishable(references: list[PolicyReference]) -> None:
    """The served policy can name the checkpoint a worker serves only among checkpoints whose
    answers to the probe differ at the serving precision: two that do not are a user's input
    the test cannot use, never a failure of the deployment."""
    for index, first in enumerate(references):
        for second in references[index + 1 :]:
            if not served_policy.distinguishable(first, second):
                raise MissingInput(
                    f"the checkpoints {first.checkpoint} and {second.checkpoint} give the "
                    "served-policy probe the same answers within the tolerance of "
                    f"{served_policy.tolerance_for(first).stated}, so no "
                    "served answer can tell them apart: give --update-model-path checkpoints "
                    "that differ"
                )
