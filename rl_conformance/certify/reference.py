"""The reference adapter: a rollout client for vLLM Python workers behind Dynamo that keeps the
whole Integration Checklist. It passes every certification scenario; `twins` breaks it one
habit at a time.

Written as an adapter author would write it (httpx, no harness imports beyond the protocol and
the admission guard), so that it doubles as an example.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx

from ..admission import AdmissionError, admit_sample
from .protocol import (
    AdapterContext,
    GenerationGated,
    Policy,
    RefreshFailed,
    RolloutRequest,
    Sample,
)

PROTOCOL_VERSION = 1
REQUIRED_ROUTES = (
    "pause_generation",
    "update_weights_from_disk",
    "flush_cache",
    "get_weight_version",
    "resume_generation",
)
TERMINAL = ("stop", "length")
DISCOVERY_ATTEMPTS = 10
DISCOVERY_WAIT_S = 0.1


class AttemptFailed(Exception):
    """This attempt gave no verified result; another attempt may."""


class ReferenceAdapter:
    guarded = True
    """Every sample passes the admission guard before it is admitted."""

    def __init__(self, context: AdapterContext) -> None:
        self.context = context
        self.http = httpx.Client(timeout=httpx.Timeout(context.request_timeout_s))
        self.gated = False
        self.version: str | None = None

    # -- generation -------------------------------------------------------------------------

    def generate(self, request: RolloutRequest) -> Sample | None:
        if self.gated:
            raise GenerationGated("the last policy refresh failed; generation stays gated")
        for _ in range(self.context.max_attempts):
            if request.cancel.is_cancelled():
                return None
            try:
                sample = self._attempt(request, self.attempt_id(request))
            except AttemptFailed:
                continue
            if sample is None:
                return None
            self.context.sink.admit(sample)
            return sample
        return None

    def attempt_id(self, request: RolloutRequest) -> str:
        """A fresh identity per attempt: a late completion of an abandoned attempt is then
        told apart from the retry that replaced it."""
        return f"{request.slot}-{uuid.uuid4().hex[:12]}"

    def request_body(self, request: RolloutRequest) -> dict[str, Any]:
        return {
            "model": self.context.model,
            "prompt": list(request.prompt_ids),
            "max_tokens": request.max_tokens,
            "temperature": 0,
            "logprobs": 0,
            "prompt_logprobs": 0,
            "stream": True,
            "nvext": {"extra_fields": ["completion_token_ids", "prompt_logprobs"]},
        }

    def _attempt(self, request: RolloutRequest, attempt_id: str) -> Sample | None:
        """One streamed attempt: the sample if verified, None if cancelled."""
        ids: list[int] = []
        logprobs: list[float | None] = []
        prompt_logprobs: list[float | None] | None = None
        finish: str | None = None
        done = False
        try:
            with self.http.stream(
                "POST",
                self.context.frontend_url + "/v1/completions",
                json=self.request_body(request),
                headers={"x-request-id": attempt_id},
            ) as response:
                if response.status_code != 200:
                    raise AttemptFailed(f"HTTP {response.status_code}")
                for event in self.events(response):
                    if request.cancel.is_cancelled():
                        break
                    if event == "[DONE]":
                        done = True
                        break
                    if "error" in event:
                        raise AttemptFailed(f"error frame: {event['error']}")
                    choice = (event.get("choices") or [{}])[0]
                    nvext = event.get("nvext") or {}
                    ids.extend(self.token_ids(choice, nvext))
                    logprobs.extend((choice.get("logprobs") or {}).get("token_logprobs") or [])
                    if nvext.get("prompt_logprobs") is not None:
                        prompt_logprobs = self.selected_prompt_logprobs(
                            request.prompt_ids, nvext["prompt_logprobs"]
                        )
                    finish = choice.get("finish_reason") or finish
        except httpx.HTTPError as exc:
            if not ids:
                raise AttemptFailed(f"transport: {exc!r}") from exc
            done = False  # the stream broke after some tokens arrived
        if request.cancel.is_cancelled() or not done or finish not in TERMINAL:
            return self.incomplete(request, attempt_id, ids, logprobs, finish, done)
        sample = Sample(
            prompt_ids=request.prompt_ids,
            token_ids=tuple(ids),
            logprobs=tuple(logprobs),
            finish_reason=finish,
            attempt_id=attempt_id,
            prompt_logprobs=None if prompt_logprobs is None else tuple(prompt_logprobs),
            model=self.context.model,
            weight_version=self.version,
        )
        if not self.guarded:
            return sample
        try:
            admit_sample(
                sample.token_ids,
                sample.logprobs,
                sample.finish_reason,
                prompt_ids=sample.prompt_ids,
                prompt_logprobs=sample.prompt_logprobs,
                model=sample.model,
                expected_model=self.context.model,
            )
        except AdmissionError as exc:
            raise AttemptFailed(str(exc)) from exc
        return sample

    def incomplete(
        self,
        request: RolloutRequest,
        attempt_id: str,
        ids: list[int],
        logprobs: list[float | None],
        finish: str | None,
        done: bool,
    ) -> Sample | None:
        """A cancelled rollout gives nothing; an unfinished one is a failed attempt."""
        if request.cancel.is_cancelled():
            return None
        raise AttemptFailed(f"no verified terminal state (done={done}, finish={finish})")

    @staticmethod
    def events(response: httpx.Response) -> Iterator[Any]:
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            yield "[DONE]" if data == "[DONE]" else json.loads(data)

    @staticmethod
    def token_ids(choice: dict[str, Any], nvext: dict[str, Any]) -> list[int]:
        return list(nvext.get("completion_token_ids") or [])

    @staticmethod
    def selected_prompt_logprobs(
        prompt_ids: tuple[int, ...], entries: list[Any]
    ) -> list[float | None]:
        """vLLM's prompt logprobs: one entry per prompt position, `None` where undefined (the
        first), else `{token_id: {"logprob": ...}}`."""
        out: list[float | None] = []
        for token_id, entry in zip(prompt_ids, entries, strict=False):
            if entry is None:
                out.append(None)
                continue
            chosen = entry.get(str(token_id)) or next(iter(entry.values()), {})
            out.append(chosen.get("logprob"))
        return out

    # -- policy refresh ---------------------------------------------------------------------

    def refresh_policy(self, policy: Policy) -> None:
        self.gated = True  # no new rollouts until the fleet verifiably serves `policy`
        workers = self.discover()
        self.each(workers, "pause_generation", {})
        self.require_same(workers, self.discover())
        update = {"model_path": policy.model_path, "weight_version": policy.version}
        self.each(workers, "update_weights_from_disk", update)
        self.each(workers, "flush_cache", {})
        for instance, worker in workers.items():
            reply = self.call(worker, "get_weight_version", {})
            if reply.get("version") != policy.version:
                raise RefreshFailed(
                    f"worker {instance} reports version {reply.get('version')!r}, "
                    f"expected {policy.version!r}"
                )
        self.require_same(workers, self.discover())
        self.each(workers, "resume_generation", {})
        self.verify_generation()
        self.version = policy.version
        self.gated = False

    def discover(self) -> dict[int, dict[str, Any]]:
        """The current worker set by instance id, waiting (bounded) for every expected worker."""
        for _ in range(DISCOVERY_ATTEMPTS):
            try:
                reply = self.http.get(self.context.rl_url + "/v1/rl/workers")
                document = reply.json()
            except (httpx.HTTPError, ValueError) as exc:
                raise RefreshFailed(f"discovery failed: {exc!r}") from exc
            if document.get("protocol_version") != PROTOCOL_VERSION:
                raise RefreshFailed(
                    f"discovery protocol_version {document.get('protocol_version')!r}, "
                    f"expected {PROTOCOL_VERSION}"
                )
            workers = [
                w
                for w in document.get("workers") or []
                if w.get("model") in (None, self.context.model)
            ]
            for worker in workers:
                if worker.get("error") or not worker.get("system_url"):
                    raise RefreshFailed(
                        f"worker {worker.get('instance_id')} is unavailable: {worker.get('error')}"
                    )
                missing = [r for r in REQUIRED_ROUTES if r not in worker.get("routes", [])]
                if missing:
                    raise RefreshFailed(
                        f"worker {worker['instance_id']} does not advertise {', '.join(missing)}"
                    )
            if len(workers) >= self.context.expected_workers:
                return {w["instance_id"]: w for w in workers}
            time.sleep(DISCOVERY_WAIT_S)
        raise RefreshFailed(
            f"discovery lists {len(workers)} of {self.context.expected_workers} expected workers"
        )

    @staticmethod
    def require_same(before: dict[int, Any], now: dict[int, Any]) -> None:
        if set(before) != set(now):
            raise RefreshFailed(
                f"membership changed during the refresh: {sorted(before)} -> {sorted(now)}"
            )

    def each(self, workers: dict[int, dict[str, Any]], route: str, body: dict[str, Any]) -> None:
        for worker in workers.values():
            self.call(worker, route, body)

    def call(self, worker: dict[str, Any], route: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{worker['system_url'].rstrip('/')}/engine/{route}"
        try:
            reply = self.http.post(url, json=body)
            document = reply.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise RefreshFailed(f"{route} on worker {worker['instance_id']}: {exc!r}") from exc
        if reply.status_code != 200 or document.get("status") != "ok":
            raise RefreshFailed(
                f"{route} on worker {worker['instance_id']}: HTTP {reply.status_code} {document}"
            )
        return dict(document)

    def verify_generation(self) -> None:
        probe = RolloutRequest(slot="post-update", prompt_ids=(11, 12, 13), max_tokens=2)
        try:
            sample = self._attempt(probe, self.attempt_id(probe))
        except AttemptFailed as exc:
            raise RefreshFailed(f"post-update generation failed: {exc}") from exc
        if sample is None:
            raise RefreshFailed("post-update generation gave no result")

    def close(self) -> None:
        self.http.close()


def reference_adapter(context: AdapterContext) -> ReferenceAdapter:
    return ReferenceAdapter(context)
