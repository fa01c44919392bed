"""Broken twins of the reference adapter: each keeps every habit but one, taken from bugs seen in
public reviews of real rollout clients. The certification must fail each on the scenarios where
its bug shows, and only there (`fixtures/expected/adapter-twins.json`)."""

from __future__ import annotations

import dataclasses
import json
import threading
import zlib
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .protocol import AdapterContext, Policy, RolloutRequest, Sample
from .reference import AttemptFailed, ReferenceAdapter
from .reference_families import (
    ChatReferenceAdapter,
    SGLangReferenceAdapter,
    SidecarReferenceAdapter,
)

if TYPE_CHECKING:
    from .runner import ScenarioResult

VOCABULARY = 32_000


class Retokenizes(ReferenceAdapter):
    """Takes token ids from its own tokenizer applied to the generated text."""

    guarded = False

    def request_body(self, request: RolloutRequest) -> dict[str, Any]:
        body = super().request_body(request)
        body["nvext"] = {"extra_fields": ["prompt_logprobs"]}
        return body

    @staticmethod
    def token_ids(choice: dict[str, Any], nvext: dict[str, Any]) -> list[int]:
        pieces = (choice.get("logprobs") or {}).get("tokens") or []
        return [zlib.crc32(piece.encode()) % VOCABULARY for piece in pieces]


class CachesMembership(ReferenceAdapter):
    """Reads discovery once and keeps the worker set for the adapter's lifetime."""

    def __init__(self, context: AdapterContext) -> None:
        super().__init__(context)
        self.cached: dict[int, dict[str, Any]] | None = None

    def discover(self) -> dict[int, dict[str, Any]]:
        if self.cached is None:
            self.cached = super().discover()
        return self.cached


class DerivesSystemUrl(ReferenceAdapter):
    """Builds each worker's admin URL from its transport address instead of `system_url`."""

    def discover(self) -> dict[int, dict[str, Any]]:
        workers = super().discover()
        for worker in workers.values():
            address = str(next(iter(worker["transport"].values()))).split("/")[0]
            worker["system_url"] = f"http://{address}"
        return workers


class NamesCurrentPolicy(ReferenceAdapter):
    """Names every sample after the policy current when it is admitted, also one a refresh
    overtook mid-stream."""

    def sample_version(self, version: str | None, refreshes: int) -> str | None:
        return self.version


class AdmitsPartialStreams(ReferenceAdapter):
    """Admits whatever arrived when a stream ends early or the trainer cancels it."""

    guarded = False

    def incomplete(
        self,
        request: RolloutRequest,
        attempt_id: str,
        ids: list[int],
        logprobs: list[float | None],
        finish: str | None,
        done: bool,
    ) -> Sample | None:
        if not ids:
            raise AttemptFailed("nothing arrived")
        return Sample(
            prompt_ids=request.prompt_ids,
            token_ids=tuple(ids),
            logprobs=tuple(logprobs),
            finish_reason=finish or "stop",
            attempt_id=attempt_id,
            model=self.context.model,
        )


class RetriesWithoutIdentity(ReferenceAdapter):
    """Retries a slow attempt under the slot's own id while the first keeps running, and admits
    every attempt that completes."""

    def __init__(self, context: AdapterContext) -> None:
        super().__init__(context)
        self.http.timeout = self.http.timeout.__class__(context.request_timeout_s * 5)

    def attempt_id(self, request: RolloutRequest) -> str:
        return request.slot

    def generate(self, request: RolloutRequest) -> Sample | None:
        if self.gated:
            return super().generate(request)
        results: list[Sample] = []

        def attempt() -> None:
            try:
                sample = self._attempt(request, self.attempt_id(request))
            except AttemptFailed:
                return
            if sample is not None:
                results.append(sample)

        threads: list[threading.Thread] = []
        for _ in range(self.context.max_attempts):
            thread = threading.Thread(target=attempt, daemon=True)
            thread.start()
            threads.append(thread)
            thread.join(self.context.request_timeout_s)
            if results:
                break
        for thread in threads:
            thread.join(self.context.request_timeout_s * 5)
        for sample in results:
            self.context.sink.admit(sample)
        return results[0] if results else None


class ReopensAfterFailedFlush(ReferenceAdapter):
    """Treats a failed cache flush as done and reopens the fleet."""

    def call(self, worker: dict[str, Any], route: str, body: dict[str, Any]) -> dict[str, Any]:
        if route != "flush_cache":
            return super().call(worker, route, body)
        self.http.post(f"{worker['system_url'].rstrip('/')}/engine/{route}", json=body)
        return {"status": "ok"}


class DropsNoneLogprobs(ReferenceAdapter):
    """Filters `None` out of the prompt log probabilities, shifting their alignment."""

    guarded = False

    @staticmethod
    def selected_prompt_logprobs(
        prompt_ids: tuple[int, ...], entries: list[Any]
    ) -> list[float | None]:
        values = ReferenceAdapter.selected_prompt_logprobs(prompt_ids, entries)
        return [value for value in values if value is not None]


class IgnoresProtocolVersion(ReferenceAdapter):
    """Reads any discovery body as protocol version 1."""

    protocol_checked = False


class StaysGatedAfterFailure(ReferenceAdapter):
    """Once a refresh has failed, keeps generation gated for good, even after a retried refresh
    verifiably succeeds."""

    def __init__(self, context: AdapterContext) -> None:
        super().__init__(context)
        self.failed_once = False

    def refresh_policy(self, policy: Policy) -> None:
        try:
            super().refresh_policy(policy)
        except Exception:
            self.failed_once = True
            raise
        if self.failed_once:
            self.gated = True


class SidecarKeepsCache(SidecarReferenceAdapter):
    """Pauses in `keep` mode, in which vLLM ignores `clear_cache`: stale KV state survives the
    update, and the sidecar has no flush route to make up for it."""

    def pause_body(self) -> dict[str, Any]:
        return {"mode": "keep", "clear_cache": True}


class SGLangUpdateWithoutFlush(SGLangReferenceAdapter):
    """Turns off the flush SGLang's disk update does by default, and flushes nothing else."""

    def apply(self, worker: dict[str, Any], policy: Policy) -> None:
        update = {
            "model_path": policy.model_path,
            "weight_version": policy.version,
            "flush_cache": False,
        }
        self.call(worker, self.UPDATE, update)


class ChatTemplatesPrompt(ChatReferenceAdapter):
    """Sends the prompt as message text for the chat template to tokenize, not as
    `nvext.token_data`."""

    def request_body(self, request: RolloutRequest) -> dict[str, Any]:
        body = super().request_body(request)
        body["messages"] = [{"role": "user", "content": " ".join(map(str, request.prompt_ids))}]
        body["nvext"] = {"extra_fields": ["completion_token_ids"]}
        return body


class OneIdentityPerTrajectory(ReferenceAdapter):
    """Sends every turn of a multi-turn trajectory under the trajectory's id, a sticky session
    id an agent loop keeps to route the trajectory to one worker, reused as the request id."""

    def attempt_id(self, request: RolloutRequest) -> str:
        return request.trajectory or super().attempt_id(request)


class _RetokenizedHistory(ReferenceAdapter):
    """Builds a later turn's prompt by tokenizing the conversation again: the ids the turn before
    generated come back as its own tokenizer's ids of their text, not the engine's (a chat
    template re-applied to the messages each turn)."""

    def __init__(self, context: AdapterContext) -> None:
        super().__init__(context)
        self.turns: dict[str, tuple[int, tuple[int, ...]]] = {}
        """Per trajectory, where the last turn's generated ids begin in the next prompt, and
        those ids."""

    def generate(self, request: RolloutRequest) -> Sample | None:
        previous = self.turns.get(request.trajectory) if request.trajectory else None
        if previous is not None:
            request = dataclasses.replace(request, prompt_ids=retokenized(request, *previous))
        sample = super().generate(request)
        if sample is not None and request.trajectory is not None:
            self.turns[request.trajectory] = (len(sample.prompt_ids), sample.token_ids)
        return sample


def retokenized(request: RolloutRequest, start: int, generated: tuple[int, ...]) -> tuple[int, ...]:
    """`request`'s prompt with the ids generated at `start` spelled by another tokenizer: ids of
    the same small range the kit's prompts use, so the deployment still takes them."""
    prompt = request.prompt_ids
    if prompt[start : start + len(generated)] != generated:
        return prompt
    spelled = tuple(100 + zlib.crc32(str(token).encode()) % 900 for token in generated)
    return (*prompt[:start], *spelled, *prompt[start + len(generated) :])


class RetokenizesHistory(_RetokenizedHistory):
    """The completions reference, tokenizing a trajectory's history again each turn."""


class SGLangRetokenizesHistory(_RetokenizedHistory, SGLangReferenceAdapter):
    """SGLang's native reference, tokenizing a trajectory's history again each turn."""


class RawPayloadIds(ReferenceAdapter):
    """Asks for the generated ids only inside the raw engine payload (`nvext.engine_data`) and
    takes them from there, failing closed where it is missing."""

    def request_body(self, request: RolloutRequest) -> dict[str, Any]:
        body = super().request_body(request)
        body["nvext"] = {"extra_fields": ["engine_data", "prompt_logprobs"]}
        return body

    @staticmethod
    def token_ids(choice: dict[str, Any], nvext: dict[str, Any]) -> list[int]:
        return list((nvext.get("engine_data") or {}).get("completion_token_ids") or [])


class MistypedGenerationPath(ReferenceAdapter):
    """A first draft's typo: rollouts go to `/v1/completion`, which the frontend answers 404,
    so every rollout returns None; the refresh's own post-update probe uses the right path."""

    def __init__(self, context: AdapterContext) -> None:
        super().__init__(context)
        self.rolling_out = threading.local()

    def generate(self, request: RolloutRequest) -> Sample | None:
        self.rolling_out.now = True
        try:
            return super().generate(request)
        finally:
            self.rolling_out.now = False

    @property
    def generation_path(self) -> str:
        return "/v1/completion" if getattr(self.rolling_out, "now", False) else "/v1/completions"


TWINS: dict[str, type[ReferenceAdapter]] = {
    "retokenizes": Retokenizes,
    "caches_membership": CachesMembership,
    "derives_system_url": DerivesSystemUrl,
    "admits_partial_streams": AdmitsPartialStreams,
    "retries_without_identity": RetriesWithoutIdentity,
    "reopens_after_failed_flush": ReopensAfterFailedFlush,
    "drops_none_logprobs": DropsNoneLogprobs,
    "names_current_policy": NamesCurrentPolicy,
    "stays_gated_after_failure": StaysGatedAfterFailure,
    "ignores_protocol_version": IgnoresProtocolVersion,
    "mistyped_generation_path": MistypedGenerationPath,
    "one_identity_per_trajectory": OneIdentityPerTrajectory,
    "raw_payload_ids": RawPayloadIds,
    "retokenizes_history": RetokenizesHistory,
}

FAMILY_REFERENCES: dict[str, dict[str, type[ReferenceAdapter]]] = {
    "vllm": {"reference": ReferenceAdapter, "reference-chat": ChatReferenceAdapter},
    "vllm-sidecar": {"reference-sidecar": SidecarReferenceAdapter},
    "sglang": {"reference-sglang": SGLangReferenceAdapter},
}
"""The adapters `--reference` adds per certification fleet: each must pass."""
FAMILY_TWINS: dict[str, dict[str, type[ReferenceAdapter]]] = {
    "vllm": {**TWINS, "chat_templates_prompt": ChatTemplatesPrompt},
    "vllm-sidecar": {"sidecar_keeps_cache": SidecarKeepsCache},
    "sglang": {
        "sglang_update_without_flush": SGLangUpdateWithoutFlush,
        "sglang_retokenizes_history": SGLangRetokenizesHistory,
    },
}
"""The broken twins `--reference` adds per certification fleet: each must fail as reviewed."""
ALL_TWINS = frozenset(name for twins in FAMILY_TWINS.values() for name in twins)

REVIEWED = Path(__file__).resolve().parents[2] / "fixtures" / "expected" / "adapter-twins.json"
"""Each twin's reviewed failures: (scenario -> failed checklist items); in a checkout only."""


def reviewed_failures(path: Path = REVIEWED) -> dict[str, dict[str, list[str]]] | None:
    """The reviewed failures of each twin, or None where they are not at hand (an installed
    package carries no fixtures)."""
    try:
        found: dict[str, dict[str, list[str]]] = json.loads(path.read_text())["failures"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found


def self_check_problems(
    results: Iterable[ScenarioResult],
    scenarios: Collection[str],
    reviewed: dict[str, dict[str, list[str]]] | None = None,
) -> list[str]:
    """How the broken twins' results differ from what was reviewed, over the `scenarios` run:
    a twin that errored, failed elsewhere or not where its bug shows. Empty when they agree
    (or, without the review at hand, when no twin errored)."""
    results = [result for result in results if result.adapter in ALL_TWINS]
    problems = [
        f"broken twin {result.adapter} in scenario {result.scenario.name}: {result.error}"
        for result in results
        if result.error is not None
    ]
    if reviewed is None:
        return problems
    for twin in sorted({result.adapter for result in results}):
        observed = {
            result.scenario.name: sorted(finding.check_id for finding in result.failed)
            for result in results
            if result.adapter == twin and result.failed
        }
        expected = {
            scenario: sorted(items)
            for scenario, items in reviewed.get(twin, {}).items()
            if scenario in scenarios
        }
        if observed != expected:
            problems.append(
                f"broken twin {twin} failed {observed or 'nothing'}; reviewed: "
                f"{expected or 'nothing'} (fixtures/expected/adapter-twins.json)"
            )
    return problems
