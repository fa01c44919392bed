"""Adapter certification: an RL framework's rollout client judged against the contract.

The protocol an adapter implements is importable on its own (`rl_conformance.certify.protocol`);
the runner, proxy and fake fleet are loaded only when a certification runs.
"""

from __future__ import annotations

from .protocol import (
    AdapterContext,
    AdapterFactory,
    CancelToken,
    GenerationGated,
    Policy,
    RefreshFailed,
    RolloutAdapter,
    RolloutRequest,
    Sample,
    SampleSink,
)

__all__ = [
    "AdapterContext",
    "AdapterFactory",
    "CancelToken",
    "GenerationGated",
    "Policy",
    "RefreshFailed",
    "RolloutAdapter",
    "RolloutRequest",
    "Sample",
    "SampleSink",
]
