"""dynamo-rl-conformance: conformance and contract tests for Dynamo's RL serving contract."""

from __future__ import annotations

from .capabilities import CAPABILITIES, Backend, Capability, Support
from .checks import REGISTRY, CheckResult, Violation
from .client import Client
from .errors import (
    ConfigurationError,
    ConformanceError,
    DeadlineExceeded,
    LaunchError,
    TransportError,
)
from .launchers import ExternalLauncher, FakeLauncher
from .stream_state import StreamMachine, StreamState
from .target import Target
from .verdict import (
    ConformanceFailure,
    FeatureAbsent,
    Inconclusive,
    MissingInput,
    NotAdvertised,
    Unobservable,
    Verdict,
)
from .version import __version__
from .wire import Exchange

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
