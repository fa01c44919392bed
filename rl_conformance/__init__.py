"""dynamo-rl-conformance: conformance and contract tests for Dynamo's RL serving contract.

Names are loaded on first use, so that `rl_conformance.admission` (the runtime guard a trainer
calls on every sample) and `rl_conformance.certify.protocol` import nothing but themselves.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import __version__

_EXPORTS = {
    "CAPABILITIES": "model.capabilities",
    "Backend": "model.capabilities",
    "Capability": "model.capabilities",
    "Support": "model.capabilities",
    "REGISTRY": "checks",
    "CheckResult": "checks",
    "Violation": "checks",
    "Client": "client.http",
    "ConfigurationError": "errors",
    "ConformanceError": "errors",
    "DeadlineExceeded": "errors",
    "LaunchError": "errors",
    "TransportError": "errors",
    "ExternalLauncher": "launchers",
    "FakeLauncher": "launchers",
    "StreamMachine": "wire.stream_state",
    "StreamState": "wire.stream_state",
    "Target": "model.target",
    "ConformanceFailure": "model.verdict",
    "FeatureAbsent": "model.verdict",
    "Inconclusive": "model.verdict",
    "MissingInput": "model.verdict",
    "NotAdvertised": "model.verdict",
    "Unobservable": "model.verdict",
    "Verdict": "model.verdict",
    "Exchange": "wire.exchange",
}

if TYPE_CHECKING:
    from .checks import REGISTRY, CheckResult, Violation
    from .client.http import Client
    from .errors import (
        ConfigurationError,
        ConformanceError,
        DeadlineExceeded,
        LaunchError,
        TransportError,
    )
    from .launchers import ExternalLauncher, FakeLauncher
    from .model.capabilities import CAPABILITIES, Backend, Capability, Support
    from .model.target import Target
    from .model.verdict import (
        ConformanceFailure,
        FeatureAbsent,
        Inconclusive,
        MissingInput,
        NotAdvertised,
        Unobservable,
        Verdict,
    )
    from .wire.exchange import Exchange
    from .wire.stream_state import StreamMachine, StreamState


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rl_conformance' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "CAPABILITIES",
    "REGISTRY",
    "Backend",
    "Capability",
    "CheckResult",
    "Client",
    "ConfigurationError",
    "ConformanceError",
    "ConformanceFailure",
    "DeadlineExceeded",
    "Exchange",
    "ExternalLauncher",
    "FakeLauncher",
    "FeatureAbsent",
    "Inconclusive",
    "LaunchError",
    "MissingInput",
    "NotAdvertised",
    "StreamMachine",
    "StreamState",
    "Support",
    "Target",
    "TransportError",
    "Unobservable",
    "Verdict",
    "Violation",
    "__version__",
]
