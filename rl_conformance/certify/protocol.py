"""What an RL framework implements to have its rollout client certified.

An adapter is a thin shim over the framework's own client. The certification runner creates it
with `AdapterContext` (the deployment's URLs, the framework's own settings and the sink) and then
drives it as a trainer would: `generate` for each rollout slot, `refresh_policy` between steps.
The adapter reports every sample it admits to training through `context.sink`; the runner judges
those admissions against what went over the wire.

Only the standard library is imported here, so a framework's test suite can implement the
protocol without pulling in the harness.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Sample:
    """One rollout as the adapter hands it to training.

    `token_ids` and `logprobs` are the generated tokens and their selected log probabilities,
    aligned one to one; `prompt_logprobs` (when the adapter asked for them) is aligned with
    `prompt_ids`, its undefined first position kept as `None`. `attempt_id` names the request
    the sample came from (the `x-request-id` the adapter sent), `finish_reason` its terminal
    state as the engine reported it. `weight_version` names the one policy that generated every
    token, when the adapter knows it; a sample a refresh overtook mid-stream has tokens of two
    policies and names none (None)."""

    prompt_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    logprobs: tuple[float | None, ...]
    finish_reason: str
    attempt_id: str
    prompt_logprobs: tuple[float | None, ...] | None = None
    model: str | None = None
    weight_version: str | None = None


class CancelToken:
    """Set by the trainer when it no longer wants a rollout (partial-rollout abort)."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    def is_cancelled(self) -> bool:
        return self._event.is_set()


@dataclass(frozen=True)
class RolloutRequest:
    """One rollout slot: the prompt as token ids and the sampling budget.

    A turn of a multi-turn trajectory names it: `trajectory` is the same for every turn, `turn`
    counts from 0, and a later turn's prompt holds the earlier turns' prompt, generated ids and
    the environment's reply. Each turn is a generation of its own (an attempt identity of its
    own); `trajectory` is None for a single-turn rollout."""

    slot: str
    prompt_ids: tuple[int, ...]
    max_tokens: int
    cancel: CancelToken = field(default_factory=CancelToken)
    trajectory: str | None = None
    turn: int = 0


@dataclass(frozen=True)
class Policy:
    """The policy to load: where its weights are and the version it is to be known by.

    `model_path` is a real, writable directory the kit made for this policy (under a temporary
    directory it owns and removes); `step` is the training step the policy comes from, for
    clients that count versions as integers."""

    version: str
    model_path: str
    step: int = 0


class SampleSink(Protocol):
    def admit(self, sample: Sample) -> None:
        """The adapter admits `sample` to training."""


@dataclass(frozen=True)
class AdapterContext:
    """What the framework knows before the first call.

    `expected_workers` is the size of the fleet the trainer was configured for: discovery may
    list fewer while workers are still registering. `request_timeout_s` is the adapter's own
    deadline for one generation attempt; `max_attempts` its retry budget per slot.

    `family` names the administration family of the fleet (`vllm`, `vllm-sidecar`, `sglang`).
    `worker_urls` are the trusted worker URLs the deployment supplies where workers are not
    registered with discovery (SGLang); empty where discovery lists them."""

    frontend_url: str
    rl_url: str
    model: str
    sink: SampleSink
    expected_workers: int
    request_timeout_s: float = 2.0
    max_attempts: int = 3
    family: str = "vllm"
    worker_urls: tuple[str, ...] = ()
    control_timeout_s: float = 5.0
    """The adapter's deadline for one administration call; the kit abandons a whole step
    after `STEP_BOUND_S`."""


GENERATION = "generation"
REFRESH = "refresh"
"""What an adapter implements: declare `implements = {"refresh"}` (or `{"generation"}`) on a
client that does only one half; the checklist items of the other half are then not applicable,
and the kit does not drive those steps. Undeclared means both."""


class RefreshFailed(Exception):
    """Raised by `refresh_policy` when the fleet could not be moved to the new policy; the
    adapter keeps generation gated until a later refresh succeeds."""


class GenerationGated(Exception):
    """Raised by `generate` while the adapter keeps generation gated."""


@runtime_checkable
class RolloutAdapter(Protocol):
    def generate(self, request: RolloutRequest) -> Sample | None:
        """Run one rollout slot; admit at most one sample for it through the sink and return it,
        or return None when no verified result was obtained."""

    def refresh_policy(self, policy: Policy) -> None:
        """Move every worker to `policy` (pause, update, invalidate, verify, resume), or raise
        `RefreshFailed` and keep generation gated."""

    def close(self) -> None:
        """Release connections; called once after the last scenario step."""


class AsyncRolloutAdapter(Protocol):
    """The same protocol for an asyncio client: the kit runs these coroutines on an event loop
    of its own (one per scenario) and cancels one it abandons."""

    async def generate(self, request: RolloutRequest) -> Sample | None: ...

    async def refresh_policy(self, policy: Policy) -> None: ...

    async def close(self) -> None: ...


AdapterFactory = Callable[[AdapterContext], RolloutAdapter | AsyncRolloutAdapter]
