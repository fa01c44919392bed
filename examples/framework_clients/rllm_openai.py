"""rLLM's rollout engine for OpenAI-compatible servers, certified through a shim.

`rllm/engine/rollout/openai_engine.py` (rllm-org/rllm, cited and pinned in
`fixtures/framework_clients/sources.json`) is rLLM's `OpenAIEngine`: the rollout engine its
workflows (`AgentWorkflowEngine`) use against any OpenAI-compatible endpoint, and its trainer's
teacher engine for distillation. It is loaded unchanged from the checkout
`RL_CONFORMANCE_RLLM_SOURCE` names, with the two rLLM modules it imports that it needs whole:
`rllm/engine/rollout/rollout_engine.py` (`ModelOutput`, `RolloutEngine`) and `rllm/env.py`
(`env_int`), and `rllm/globals.py` (the think delimiters). It needs the `openai` SDK.

A rollout is `OpenAIEngine.completion(prompt_ids, max_tokens=...)`, rLLM's token-in path (the
one `compute_logprobs` takes; a workflow's chat messages reach it rendered by the chat parser):
`POST /v1/completions` through `openai.AsyncOpenAI` (the SDK's own two retries on 408, 409, 429
and 5xx, no request identity), up to `api_retries` (3) attempts of its own on any exception, the
generated ids from `choices[0].token_ids` (vLLM's `return_token_ids` answer) or else the text
encoded again with the tokenizer, the log probabilities from `logprobs.token_logprobs` (else
none), and the finish reason as the reply gives it. The engine is configured with `logprobs` 1
(as its `compute_logprobs` asks) so that rollouts carry their log probabilities for training,
and greedy (`temperature` 0), so that every run gives the same verdicts: what decides one is how
the client handles a reply, never which tokens were sampled (encoding a sampled text again may
or may not give as many ids as it had tokens).

Stood in: the tokenizer and chat parser (`AutoTokenizer` of the served model: here the fake
fleet's toy tokenizer; the parser's `parse_completion` decodes the ids, since thinking and tool
calls do not bear on a verdict), and the modules the file imports for paths a token-id rollout
does not take (`PIL.Image` for images, `rllm.parser` behind the parser passed in, `rllm.tools`
for tool schemas, `rllm.workflows`' termination event for an over-long prompt). rLLM has no
per-request abort: a trainer that no longer wants a rollout cancels its asyncio task, which the
shim does when the kit cancels the slot. Generation only: rLLM refreshes weights through its
training backend (verl, Tinker), never through the RL routes. The sample is the `ModelOutput` as
a workflow stores it in its trajectory: completion ids, log probabilities, finish reason; rLLM
sends no request identity, so it names none.

Its verdicts, the same on the vLLM and the SGLang family (each defended with its evidence in
`fixtures/expected/framework-clients.json`): `attempt_identity` fails everywhere (no identity,
retried by the SDK and the engine alike); `engine_token_ids` fails everywhere (the ids are never
asked for, and the text is encoded again where `choices[0].token_ids` is absent, as it is behind
Dynamo); `verified_terminal_only` in `finish_unrecognised` and `logprob_alignment` in
`logprobs_unusable` (a null or `"error"` finish, null or short logprobs, admitted as they came).
It reaches the backend on a healthy fleet, admits each rollout once, and admits nothing the
trainer cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import sys
import types
from typing import Any

from fake_backends.model import tokenizer as toy_tokenizer
from rl_conformance.certify import AdapterContext, RolloutRequest, Sample

from .upstream import Once, exec_module, source_text

CLIENT = "rllm-openai-engine"
VARIABLE = "RL_CONFORMANCE_RLLM_SOURCE"
ENGINE = "rllm/engine/rollout/openai_engine.py"
MODULES = (
    ("rllm.env", "rllm/env.py"),
    ("rllm.globals", "rllm/globals.py"),
    ("rllm.engine.rollout.rollout_engine", "rllm/engine/rollout/rollout_engine.py"),
)
SAMPLING = {"temperature": 0.0, "logprobs": 1}
CANCEL_POLL_S = 0.01


class ToyTokenizer:
    """The served model's tokenizer, as `AutoTokenizer.from_pretrained` gives rLLM one."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return toy_tokenizer.encode(text)

    def decode(self, ids: list[int], **_: Any) -> str:
        return toy_tokenizer.decode(ids)


class DecodingParser:
    """rLLM's `ChatTemplateParser` as `completion` reaches it: the reply's content."""

    def parse_completion(self, ids: list[int]) -> dict[str, Any]:
        return {"content": toy_tokenizer.decode(ids), "reasoning": "", "tool_calls": []}


class TerminationReason(enum.Enum):
    MAX_PROMPT_LENGTH_EXCEEDED = "max_prompt_length_exceeded"


class TerminationEvent(Exception):
    def __init__(self, reason: TerminationReason) -> None:
        super().__init__(reason.value)
        self.reason = reason


def _not_used(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("not used by the certified path (chat templates built by rLLM's parser)")


def _stand_ins() -> dict[str, types.ModuleType]:
    names = (
        "PIL",
        "PIL.Image",
        "rllm",
        "rllm.engine",
        "rllm.engine.rollout",
        "rllm.parser",
        "rllm.tools",
        "rllm.tools.tool_base",
        "rllm.workflows",
    )
    modules = {name: types.ModuleType(name) for name in names}
    modules["PIL.Image"].Image = type("Image", (), {})  # type: ignore[attr-defined]
    modules["PIL"].Image = modules["PIL.Image"]  # type: ignore[attr-defined]
    parser = types.SimpleNamespace(get_parser=_not_used)
    modules["rllm.parser"].ChatTemplateParser = parser  # type: ignore[attr-defined]
    modules["rllm.tools.tool_base"].Tool = type("Tool", (), {})  # type: ignore[attr-defined]
    modules["rllm.workflows"].TerminationEvent = TerminationEvent  # type: ignore[attr-defined]
    modules["rllm.workflows"].TerminationReason = TerminationReason  # type: ignore[attr-defined]
    return modules


def _load() -> Any:
    text, path = source_text(CLIENT, VARIABLE, ENGINE)  # the primary source first
    import openai  # noqa: F401 - the engine's own dependency, named before anything runs

    with contextlib.suppress(ImportError):
        import PIL.Image  # noqa: F401 - the real one where it is installed
    for name, module in _stand_ins().items():
        sys.modules.setdefault(name, module)
    for name, relative in MODULES:
        exec_module(name, *source_text(CLIENT, VARIABLE, relative))
    return exec_module("rllm.engine.rollout.openai_engine", text, path).OpenAIEngine


load = Once(_load)
"""rLLM's `OpenAIEngine`, loaded once."""


class RLLMOpenAIEngine:
    implements = frozenset({"generation"})

    def __init__(self, context: AdapterContext) -> None:
        self.context = context
        self.engine = load()(
            model=context.model,
            tokenizer=ToyTokenizer(),
            chat_parser=DecodingParser(),
            base_url=context.frontend_url.rstrip("/") + "/v1",
            api_key="EMPTY",
            sampling_params=dict(SAMPLING),
        )

    async def generate(self, request: RolloutRequest) -> Sample | None:
        rollout = asyncio.ensure_future(
            self.engine.completion(list(request.prompt_ids), max_tokens=request.max_tokens)
        )
        while not rollout.done():
            if request.cancel.is_cancelled():
                rollout.cancel()  # the trainer drops the rollout's task
                return None
            await asyncio.sleep(CANCEL_POLL_S)
        try:
            output = rollout.result()
        except Exception as exc:  # retries exhausted: the workflow's step fails
            print(f"rllm: rollout {request.slot} failed: {exc!r}", file=sys.stderr)
            return None
        sample = Sample(
            prompt_ids=request.prompt_ids,
            token_ids=tuple(output.completion_ids or ()),
            logprobs=tuple(output.logprobs or ()),
            finish_reason=output.finish_reason,
            attempt_id="",
            model=self.context.model,
        )
        self.context.sink.admit(sample)
        return sample

    async def close(self) -> None:
        await self.engine.client.close()
