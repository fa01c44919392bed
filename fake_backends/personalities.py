"""The three backend personalities and what distinguishes them.

The OpenAI-compatible routes behave the same for every backend (they are the Dynamo
frontend's); the personality only decides the backend-specific parts, following the
RL integration reference's compatibility tables:

* vLLM: RL-enabled Python workers, each with a system server, listed by /v1/rl/workers;
* SGLang: the native streaming ``POST /generate`` route; no RL registration;
* TensorRT-LLM: no native route, no prompt logprobs, no RL registration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Personality:
    name: str
    native_generate: bool  # frontend serves SGLang POST /generate
    prompt_logprobs: bool  # the engine can return prompt logprobs
    rl_workers: bool  # workers run a system server and register with /v1/rl/workers


PERSONALITIES: Mapping[str, Personality] = MappingProxyType(
    {
        "vllm": Personality("vllm", native_generate=False, prompt_logprobs=True, rl_workers=True),
        "sglang": Personality(
            "sglang", native_generate=True, prompt_logprobs=True, rl_workers=False
        ),
        "trtllm": Personality(
            "trtllm", native_generate=False, prompt_logprobs=False, rl_workers=False
        ),
    }
)
BACKENDS: tuple[str, ...] = tuple(PERSONALITIES)


def get_personality(name: str) -> Personality:
    try:
        return PERSONALITIES[name]
    except KeyError:
        raise ValueError(
            f"unknown backend {name!r}; choose one of: {', '.join(BACKENDS)}"
        ) from None
