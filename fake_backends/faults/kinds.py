"""What a fault of the fake deployment's catalogue is made of: the backends it applies to, and
the one constructor both halves of the catalogue use."""

from __future__ import annotations

from fake_backends.faults.catalogue import Fault

ALL_BACKENDS = frozenset({"vllm", "sglang", "trtllm"})
PROMPT_LOGPROB_BACKENDS = frozenset({"vllm", "sglang"})
RL_BACKENDS = frozenset({"vllm"})
SGLANG = frozenset({"sglang"})
ADMIN_BACKENDS = frozenset({"vllm", "sglang"})  # workers with a system server
SIDECAR = frozenset({"vllm-sidecar"})  # vLLM with the native sidecar's routes


def fault(
    name: str, description: str, backends: frozenset[str] = ALL_BACKENDS, *, slow: bool = False
) -> Fault:
    return Fault(name, description, backends, slow=slow)
