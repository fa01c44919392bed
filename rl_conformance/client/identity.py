"""The framework identity every generation request carries (`X-RL-*` headers).

A framework correlates its attempts with Dynamo's request trace through opaque headers: the
rollout a sample belongs to, the attempt (a retry is a new attempt of the same rollout) and the
policy version the framework believes serves it. The suite speaks the same way: each test is a
rollout, each generation request an attempt, and the policy version is the one the suite last
asked the target's workers to load (`initial` before any update), so a trace of a run joins
like a framework's.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..checks.trace import ATTEMPT_HEADER, HEADERS, POLICY_HEADER, ROLLOUT_HEADER

GENERATION_PATHS = frozenset(
    {
        "/v1/completions",
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
        "/generate",
        "/inference/v1/generate",
    }
)
INITIAL_POLICY = "initial"


def _rollout() -> str:
    return f"rl-conformance-{uuid.uuid4().hex[:16]}"


@dataclass
class AttemptIdentity:
    rollout_id: str = field(default_factory=_rollout)
    policy_version: str = INITIAL_POLICY
    target_id: str = ""

    def stamp(self, method: str, url: str, headers: dict[str, str]) -> None:
        """Add the three headers to a generation request that carries none of its own."""
        if method.upper() != "POST" or urlsplit(url).path not in GENERATION_PATHS:
            return
        if any(name.lower() in HEADERS for name in headers):
            return
        headers[ROLLOUT_HEADER] = self.rollout_id
        headers[ATTEMPT_HEADER] = uuid.uuid4().hex
        headers[POLICY_HEADER] = self.policy_version
