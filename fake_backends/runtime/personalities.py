"""The three backend personalities and what distinguishes them.

The OpenAI-compatible routes behave the same for every backend (they are the Dynamo
frontend's); the personality only decides the backend-specific parts, following the
RL integration reference's compatibility tables:

* vLLM: RL-enabled Python workers (or the native sidecar), each with a system server,
  listed by /v1/rl/workers; prefix-cache hits reported in usage;
* SGLang: the native streaming ``POST /generate`` route; a system server per worker with
  SGLang's own administration routes, but no RL registration; cache hits reported;
* TensorRT-LLM: no native route, no prompt logprobs, no RL registration; its workers' system
  servers answer health and metrics and serve only the two memory routes Dynamo's TensorRT-LLM
  worker registers (`control/release_memory_occupation`, `control/resume_memory_occupation`;
  no shared RL administration contract is documented).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

ADMIN_FAMILIES = ("python", "sidecar")


@dataclass(frozen=True)
class Personality:
    name: str
    native_generate: bool  # frontend serves SGLang POST /generate
    prompt_logprobs: bool  # the engine can return prompt logprobs
    rl_workers: bool  # workers register with /v1/rl/workers
    system_servers: bool = True  # each worker runs a system server (health, metrics, /engine)
    admin_routes: bool = True  # the system server serves the backend's /engine routes
    reports_cached_tokens: bool = False  # usage carries prompt_tokens_details.cached_tokens


PERSONALITIES: Mapping[str, Personality] = MappingProxyType(
    {
        "vllm": Personality(
            "vllm",
            native_generate=False,
            prompt_logprobs=True,
            rl_workers=True,
            system_servers=True,
            reports_cached_tokens=True,
        ),
        "sglang": Personality(
            "sglang",
            native_generate=True,
            prompt_logprobs=True,
            rl_workers=False,
            system_servers=True,
            reports_cached_tokens=True,
        ),
        "trtllm": Personality(
            "trtllm",
            native_generate=False,
            prompt_logprobs=False,
            rl_workers=False,
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
