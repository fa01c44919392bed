"""A plane that refuses the suite's credentials before any test leaves its target not reached.

The preflight's answers (the frontend's `/v1/models` and one-token completion, the RL listener's
`/v1/rl/workers`, a worker system server's `/health`) that are 401 or 403 raise
`client.refusals.CredentialsRefused`; `refuse` turns them into one `AuthRefused` (a
`LaunchError`): every cell of the target is `error` with that one cause, the run exits 3, and
`diff` and `baseline` call it not comparable.
"""

from __future__ import annotations

from ..client.refusals import CredentialsRefused
from ..errors import LaunchError
from ..model.credentials import FRONTEND, LISTENER, Credentials


class AuthRefused(LaunchError):
    """A plane answered 401 or 403 before any test: its credentials are missing or wrong."""

    def __init__(self, reason: str, evidence: tuple[object, ...] = ()) -> None:
        super().__init__(reason)
        self.evidence = evidence


def refuse(refusals: list[CredentialsRefused], credentials: Credentials | None) -> None:
    """Raise `AuthRefused` when a plane refused: one sentence per plane, the RL listener's
    folded into the frontend's when it was sent the same credentials (it inherits them)."""
    found: dict[str, CredentialsRefused] = {}
    for refused in refusals:
        found.setdefault(refused.plane, refused)
    if not found:
        return
    given = credentials or Credentials()
    reasons = {plane: str(refused) for plane, refused in found.items()}
    inherited = given.plane(FRONTEND).headers == given.plane(LISTENER).headers
    if FRONTEND in found and LISTENER in found and inherited:
        del reasons[LISTENER]
        reasons[FRONTEND] += (
            f" (and so does the RL listener at {found[LISTENER].origin}, which receives the "
            "frontend's credentials)"
        )
    evidence = tuple(item for refused in found.values() for item in refused.evidence)
    raise AuthRefused("; and ".join(reasons.values()), evidence)
