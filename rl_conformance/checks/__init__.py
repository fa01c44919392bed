"""Pure conformance checks, importable as runtime guards. See `base.check` for the contract."""

from __future__ import annotations

from . import (
    admin,
    control,
    declaration,
    discovery,
    distributed,
    errors,
    held_requests,
    http,
    logprobs,
    membership,
    migration,
    pause,
    pause_modes,
    probes,
    recovery,
    served_policy,
    straddle,
    stream_data,
    stream_fold,
    streaming,
    terminal,
    tokens,
    trace,
    weight_gauge,
)
from .aggregate import aggregate_stream
from .base import REGISTRY, CheckResult, CheckSpec, Level, Violation
from .schema import schema_check
from .stream_fold import StreamFold

__all__ = [
    "REGISTRY",
    "CheckResult",
    "CheckSpec",
    "Level",
    "StreamFold",
    "Violation",
    "admin",
    "aggregate_stream",
    "control",
    "declaration",
    "discovery",
    "distributed",
    "errors",
    "held_requests",
    "http",
    "logprobs",
    "membership",
    "migration",
    "pause",
    "pause_modes",
    "probes",
    "recovery",
    "schema_check",
    "served_policy",
    "straddle",
    "stream_data",
    "stream_fold",
    "streaming",
    "terminal",
    "tokens",
    "trace",
    "weight_gauge",
]
