"""Fake NVIDIA Dynamo deployments for testing the RL serving-contract conformance suite.

An independent implementation (it imports nothing from ``rl_conformance``) of a Dynamo
frontend, its RL discovery listener and worker system servers, driving a deterministic
toy model, in three personalities (vLLM, SGLang, TensorRT-LLM).  It honours the contract
by default and breaks it in named ways on request (see ``FAULTS``).
"""

from __future__ import annotations

from fake_backends.deployment import FakeDeployment
from fake_backends.faults import FAULT_NAMES, FAULTS, Fault, UnknownFaultError
from fake_backends.personalities import BACKENDS
from fake_backends.ready_line import READY_FIELDS, parse_ready_line, read_ready_line, ready_line

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
