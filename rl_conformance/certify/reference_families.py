"""Reference adapters for the other administration families and for chat generation: each keeps
the whole Integration Checklist the way its family's routes allow, and passes every scenario its
certification fleet can stage.

* `SidecarReferenceAdapter`: vLLM's native sidecar with weight transfer enabled. The pause
  drains in-flight work and clears the cache (`clear_cache: true`); weights go through the
  transfer lifecycle, the version travels with `finish_weight_update` and is read back from
  `control/get_weight_version`.
* `SGLangReferenceAdapter`: SGLang workers reached by the URLs the deployment supplies (they are
  not registered with discovery); the built-in disk update flushes the cache by default; success
  is read from `status` or `success`, whichever the route answers with.
* `ChatReferenceAdapter`: the vLLM Python-worker refresh, generating through
  `/v1/chat/completions` with the prompt's token ids in `nvext.token_data` ("bypasses frontend
  tokenization").
"""

from __future__ import annotations

from typing import Any

from .protocol import AdapterContext, Policy, RefreshFailed, RolloutRequest
from .reference import ReferenceAdapter

SIDECAR_TRANSFER_INIT = {"backend": "conformance-synthetic"}
"""What the certification fleet's sidecars accept as `init_info`; a real trainer sends its
transfer backend's rendezvous (vLLM's weight-transfer config decides the shape)."""


class SidecarReferenceAdapter(ReferenceAdapter):
    PAUSE = "control/pause_generation"
    RESUME = "control/resume_generation"
    VERSION_ROUTE = "control/get_weight_version"
    VERSION_KEY = "weight_version"
    REQUIRED_ROUTES = (
        "control/pause_generation",
        "control/resume_generation",
        "control/get_weight_version",
        "control/is_paused",
        "update/init_weight_transfer_engine",
        "update/start_weight_update",
        "update/update_weights",
        "update/finish_weight_update",
    )

    def __init__(self, context: AdapterContext) -> None:
        super().__init__(context)
        self.transfer_ready: set[Any] = set()
        """Workers whose weight-transfer engine was initialised (once per worker)."""

    def pause(self, workers: dict[int, dict[str, Any]]) -> None:
        """Pause every worker not paused yet: the sidecar refuses to pause a paused worker (its
        endpoint is already unregistered), as one a failed refresh left paused is on a retry.
        That worker's cache was cleared by its pause, and it has served nothing since."""
        for worker in workers.values():
            if not self.call(worker, "control/is_paused", {}).get("is_paused"):
                self.call(worker, self.PAUSE, self.pause_body())

    def pause_body(self) -> dict[str, Any]:
        """Drain in-flight work, then clear the cache: the sidecar has no flush route."""
        return {"mode": "wait", "clear_cache": True}

    def apply(self, worker: dict[str, Any], policy: Policy) -> None:
        if worker["instance_id"] not in self.transfer_ready:
            self.call(
                worker, "update/init_weight_transfer_engine", {"init_info": SIDECAR_TRANSFER_INIT}
            )
            self.transfer_ready.add(worker["instance_id"])
        self.call(worker, "update/start_weight_update", {})
        update_info = {
            "names": [f"policy:{policy.model_path}"],
            "dtype_names": ["float32"],
            "shapes": [[1]],
        }
        self.call(worker, "update/update_weights", {"update_info": update_info})
        self.call(worker, "update/finish_weight_update", {"weight_version": policy.version})

    def invalidate(self, workers: dict[int, dict[str, Any]]) -> None:
        """Done by the pause (`clear_cache: true`)."""

    @staticmethod
    def accepted(document: dict[str, Any]) -> bool:
        """Sidecar routes follow vLLM's RL schemas: a `status` only on some, `error` on failure."""
        return document.get("status") != "error" and document.get("success") is not False


class SGLangReferenceAdapter(ReferenceAdapter):
    RESUME = "continue_generation"
    VERSION_KEY = "result"
    UPDATE = "control/update_weights_from_disk"

    def discover(self) -> dict[Any, dict[str, Any]]:
        """SGLang workers are not registered with discovery: the deployment's URLs are the
        fleet, keyed by URL."""
        urls = self.context.worker_urls
        if len(urls) < self.context.expected_workers:
            raise RefreshFailed(
                f"the deployment supplied {len(urls)} worker URL(s); "
                f"{self.context.expected_workers} expected"
            )
        return {url: {"instance_id": url, "system_url": url} for url in urls}

    def pause_body(self) -> dict[str, Any]:
        """Keep requests in place while the weights change."""
        return {"mode": "in_place"}

    def apply(self, worker: dict[str, Any], policy: Policy) -> None:
        update = {"model_path": policy.model_path, "weight_version": policy.version}
        self.call(worker, self.UPDATE, update)

    def invalidate(self, workers: dict[int, dict[str, Any]]) -> None:
        """Done by the update, which flushes the cache unless told `flush_cache: false`."""

    @staticmethod
    def accepted(document: dict[str, Any]) -> bool:
        """Native routes answer `status`, built-in updates `success` and `message`."""
        return document.get("status") != "error" and document.get("success") is not False


class ChatReferenceAdapter(ReferenceAdapter):
    def request_body(self, request: RolloutRequest) -> dict[str, Any]:
        return {
            "model": self.context.model,
            "messages": [{"role": "user", "content": ""}],
            "max_tokens": request.max_tokens,
            "temperature": 0,
            "logprobs": True,
            "stream": True,
            "nvext": {
                "token_data": list(request.prompt_ids),
                "extra_fields": ["completion_token_ids"],
            },
        }

    @property
    def generation_path(self) -> str:
        return "/v1/chat/completions"

    @staticmethod
    def chunk_logprobs(choice: dict[str, Any]) -> list[float | None]:
        """Chat carries one `logprobs.content` entry per generated token."""
        return [
            entry.get("logprob") for entry in (choice.get("logprobs") or {}).get("content") or []
        ]


def sidecar_reference_adapter(context: AdapterContext) -> SidecarReferenceAdapter:
    return SidecarReferenceAdapter(context)


def sglang_reference_adapter(context: AdapterContext) -> SGLangReferenceAdapter:
    return SGLangReferenceAdapter(context)


def chat_reference_adapter(context: AdapterContext) -> ChatReferenceAdapter:
    return ChatReferenceAdapter(context)
