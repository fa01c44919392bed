"""Adapters that behave as real framework clients do, for the kit's own tests: they start up by
reading discovery, write into their checkpoint directory, implement one half of the protocol,
speak asyncio, hang, refuse to start, verify workers another way, or ignore the trainer's
cancel of a unary rollout."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

import httpx

from examples.my_adapter import MyAdapter
from rl_conformance.certify import (
    AdapterContext,
    CancelToken,
    Policy,
    RefreshFailed,
    RolloutRequest,
    Sample,
)
from rl_conformance.certify.reference import ReferenceAdapter
from rl_conformance.certify.reference_families import (
    SGLangReferenceAdapter,
    SidecarReferenceAdapter,
)

CHECKPOINTS_SEEN: list[str] = []
CANCELLED: list[str] = []


class WritesMarker(ReferenceAdapter):
    """Writes a marker into the policy's checkpoint directory before loading it, as a trainer
    that saves the checkpoint itself does."""

    def refresh_policy(self, policy: Policy) -> None:
        marker = Path(policy.model_path) / "trainer-step"
        marker.write_text(str(policy.step))
        CHECKPOINTS_SEEN.append(policy.model_path)
        super().refresh_policy(policy)


class StartsUpOnDiscovery(ReferenceAdapter):
    """Reads discovery while starting and refuses a fleet with a worker `error`: the scenario's
    events begin after start-up, so the refresh meets them."""

    def __init__(self, context: AdapterContext) -> None:
        super().__init__(context)
        self.discover()


class RefreshOnly(ReferenceAdapter):
    """A framework whose rollouts go through its own OpenAI client: only the refresh is shimmed."""

    implements = frozenset({"refresh"})


class BadDeclaration(ReferenceAdapter):
    implements = frozenset({"training"})


class RefusesSlowDeadlines(ReferenceAdapter):
    """Refuses to start where the attempt deadline exceeds 10 s (one scenario only: a rollout a
    refresh lands in)."""

    def __init__(self, context: AdapterContext) -> None:
        if context.request_timeout_s > 10:
            raise RuntimeError("refusing to start: attempt deadline above 10 s")
        super().__init__(context)


class HangsAtStartUp(ReferenceAdapter):
    def __init__(self, context: AdapterContext) -> None:
        time.sleep(3)
        super().__init__(context)


class AsyncReference:
    """The reference adapter behind coroutines, as an asyncio client would look."""

    def __init__(self, context: AdapterContext) -> None:
        self.inner = ReferenceAdapter(context)

    async def generate(self, request: RolloutRequest) -> Sample | None:
        return await asyncio.to_thread(self.inner.generate, request)

    async def refresh_policy(self, policy: Policy) -> None:
        await asyncio.to_thread(self.inner.refresh_policy, policy)

    async def close(self) -> None:
        self.inner.close()


class AsyncHangingRefresh(AsyncReference):
    """A refresh that never returns: the kit must cancel it when it abandons the step."""

    async def refresh_policy(self, policy: Policy) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            CANCELLED.append(policy.version)
            raise


class VerifiesByGeneration(ReferenceAdapter):
    """Verifies every worker by a generation pinned to it (`nvext.backend_instance_id`) that
    reports the new weight version, instead of reading `get_weight_version`."""

    def verify_versions(self, workers: dict[Any, dict[str, Any]], policy: Policy) -> None:
        self.pending = (list(workers), policy.version)

    def verify_generation(self) -> None:
        instances, version = self.pending
        for instance in instances:
            self.pinned_version_check(instance, version)

    def pinned_version_check(self, instance: Any, version: str) -> None:
        body = {
            "model": self.context.model,
            "prompt": [11, 12, 13],
            "max_tokens": 2,
            "temperature": 0,
            "nvext": {
                "backend_instance_id": instance,
                "extra_fields": ["completion_token_ids", "worker_id", "engine_data"],
            },
        }
        try:
            reply = self.http.post(
                self.context.frontend_url + "/v1/completions",
                json=body,
                headers={"x-request-id": f"verify-{instance}-{version}"},
            ).json()
        except (httpx.HTTPError, ValueError) as exc:
            raise RefreshFailed(f"post-update generation on {instance}: {exc!r}") from exc
        reported = ((reply.get("nvext") or {}).get("engine_data") or {}).get("weight_version")
        if reported != version:
            raise RefreshFailed(f"worker {instance} generated with {reported!r}, not {version!r}")


class NeverVerifies(ReferenceAdapter):
    """Reads no version back; on the vLLM Python worker the update's reply names the version
    it applied, which verifies the worker."""

    def verify_versions(self, workers: dict[Any, dict[str, Any]], policy: Policy) -> None:
        return None


class SidecarNeverVerifies(SidecarReferenceAdapter):
    """Reads no version back where the update's reply does not name one (the sidecar's
    `finish_weight_update`), and reopens after one unpinned generation."""

    def verify_versions(self, workers: dict[Any, dict[str, Any]], policy: Policy) -> None:
        return None


class UnaryIgnoresCancel(MyAdapter):
    """The unary example without its cancel check: admits a reply that arrives after the
    trainer cancelled the rollout."""

    def generate(self, req: RolloutRequest, admit: bool = True) -> Sample | None:
        return super().generate(dataclasses.replace(req, cancel=CancelToken()), admit)


class UnaryNamesCurrentPolicy(MyAdapter):
    """The unary example naming each sample after the policy current when it is admitted, as
    `names_current_policy` does for streams: a rollout a refresh overtook is named the new
    policy's although its first tokens are the old one's."""

    def __init__(self, ctx: AdapterContext) -> None:
        super().__init__(dataclasses.replace(ctx, sink=self))
        self.training = ctx.sink
        self.current: str | None = None

    def admit(self, sample: Sample) -> None:
        self.training.admit(dataclasses.replace(sample, weight_version=self.current))

    def refresh_policy(self, policy: Policy) -> None:
        super().refresh_policy(policy)
        self.current = policy.version


class ReadsServerInfo(SGLangReferenceAdapter):
    """Reads each worker's topology through an engine route its own deployment allowlists
    (`server_info=get_server_info`, as Slime's tooling reads tp_size) before every refresh."""

    def refresh_policy(self, policy: Policy) -> None:
        self.each(self.discover(), "server_info", {})
        super().refresh_policy(policy)


class TokenizerManagerPassthrough(SGLangReferenceAdapter):
    """Pauses through one path that is to run whichever method the body names."""

    def pause(self, workers: dict[Any, dict[str, Any]]) -> None:
        self.each(workers, "call_tokenizer_manager", {"method": "pause_generation", "args": []})
