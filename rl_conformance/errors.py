"""Every error the harness raises, in one place.

    ConformanceError                 base of everything below
    ├── ConfigurationError           bad input from the user (flags, target files, schema names)
    │   └── WrongInput               an input the deployment contradicts (a model it does not
    │                                serve, a URL that is not Dynamo's), with what showed it
    ├── LaunchError                  a deployment could not be started or never became ready
    ├── TransportError               the deployment could not be reached or broke the connection
    │   └── DeadlineExceeded         no complete answer within the request deadline
    └── ResponseTooLarge             the body exceeded the client's size limit

Outcomes of a conformance test are not errors of the harness: a failed check raises
`ConformanceFailure` (see `rl_conformance.model.verdict`), a feature the deployment does not
offer raises `FeatureAbsent`, a route the deployment does not advertise raises `NotAdvertised`.
"""

from __future__ import annotations


class ConformanceError(Exception):
    """Base class for harness errors."""


class ConfigurationError(ConformanceError):
    """The user asked for something the harness cannot do; the message says what to change."""


class WrongInput(ConfigurationError):
    """An input the user gave that the deployment contradicts (a model it does not serve, a URL
    that is not Dynamo's, a backend its discovery contradicts): the user's mistake, never the
    deployment's failure, so its tests report `error`, never `fail`. The message names the input
    and the fix; `evidence` holds what showed it (`matrix.Evidence` items: the request, its
    reproducer and wire log)."""

    def __init__(self, message: str, evidence: tuple[object, ...] = ()) -> None:
        super().__init__(message)
        self.evidence = evidence


class LaunchError(ConformanceError):
    """A launcher could not bring a deployment up."""


class TransportError(ConformanceError):
    """The connection to the deployment failed (refused, reset, invalid HTTP)."""


class DeadlineExceeded(TransportError):
    """The deployment did not finish answering within the request deadline."""


class ResponseTooLarge(ConformanceError):
    """The deployment sent more bytes than the client accepts for one response."""
