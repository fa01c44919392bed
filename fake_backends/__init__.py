"""Fake NVIDIA Dynamo deployments for testing the RL serving-contract conformance suite.

An independent implementation (it imports nothing from ``rl_conformance``) of a Dynamo
frontend, its RL discovery listener and worker system servers, driving a deterministic
toy model, in three personalities (vLLM, SGLang, TensorRT-LLM).  It honours the contract
by default and breaks it in named ways on request (see ``FAULTS``).

The public names are imported lazily (PEP 562): ``python -m fake_backends.dynamo.worker``
runs inside the Dynamo virtual environment, which has no starlette/uvicorn/httpx, and must
be able to import the pure modules (tokenizer, toy model, generation) without the servers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fake_backends.deployment.assembly import FakeDeployment
    from fake_backends.deployment.ready_line import (
        READY_FIELDS,
        parse_ready_line,
        read_ready_line,
        ready_line,
    )
    from fake_backends.faults.deployment import FAULT_NAMES, FAULTS, Fault, UnknownFaultError
    from fake_backends.runtime.personalities import BACKENDS

__all__ = [
    "BACKENDS",
    "FAULTS",
    "FAULT_NAMES",
    "READY_FIELDS",
    "FakeDeployment",
    "Fault",
    "UnknownFaultError",
    "parse_ready_line",
    "read_ready_line",
    "ready_line",
]

_HOMES = {
    "FakeDeployment": "fake_backends.deployment.assembly",
    "FAULTS": "fake_backends.faults.deployment",
    "FAULT_NAMES": "fake_backends.faults.deployment",
    "Fault": "fake_backends.faults.deployment",
    "UnknownFaultError": "fake_backends.faults.deployment",
    "BACKENDS": "fake_backends.runtime.personalities",
    "READY_FIELDS": "fake_backends.deployment.ready_line",
    "parse_ready_line": "fake_backends.deployment.ready_line",
    "read_ready_line": "fake_backends.deployment.ready_line",
    "ready_line": "fake_backends.deployment.ready_line",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'fake_backends' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
