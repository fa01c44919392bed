"""A plane that refuses the suite for want of credentials is recognised before any test.

An answer of 401 or 403 to the preflight (the frontend's `/v1/models` and one-token completion,
the RL listener's `/v1/rl/workers`, a worker system server's `/health`) says the deployment
authenticates its clients and the run's credentials are missing or wrong: nothing it would
answer the tests says anything of the contract. The target is not reached (`AuthRefused`: every
cell `error` with that one cause, exit 3, and `diff` and `baseline` call the run not
comparable), in one sentence per plane naming the flags that give its credentials
(`model.credentials.PLANES`) and, when some were given, which.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ..errors import LaunchError
from ..model.credentials import FRONTEND, LISTENER, Credentials
from ..wire.exchange import Exchange

REFUSALS = {401: "401 Unauthorized", 403: "403 Forbidden"}


class AuthRefused(LaunchError):
    """A plane answered 401 or 403 before any test: its credentials are missing or wrong."""


def refusal(plane: str, exchange: Exchange | None, credentials: Credentials | None) -> str | None:
    """Why `exchange`, the preflight's answer on `plane` (a `model.credentials` plane key),
    refuses the suite for want of credentials; None for any other answer."""
    if exchange is None or exchange.status not in REFUSALS:
        return None
    found = (credentials or Credentials()).plane(plane)
    flags = found.flags
    parts = urlsplit(exchange.request.url)
    where = f"the {flags.title} at {parts.scheme}://{parts.netloc}"
    answered = f"{exchange.request.method} {parts.path} answered HTTP {REFUSALS[exchange.status]}"
    given = found.given()
    if not given:
        return (
            f"{where} refuses requests without credentials ({answered}): give them with {flags.how}"
        )
    if exchange.status == 401:
        return (
            f"{where} refused the credentials given ({given}; {answered}): give valid ones with "
            f"{flags.how}"
        )
    return (
        f"{where} refused access to the credentials given ({given}; {answered}): give ones "
        f"allowed these requests with {flags.how}"
    )


def refuse(answers: list[tuple[str, Exchange | None]], credentials: Credentials | None) -> None:
    """Raise `AuthRefused` when a plane's preflight answer (plane key, exchange) refuses the
    suite: one sentence per plane, the RL listener's folded into the frontend's when it was sent
    the same credentials (it inherits them)."""
    found: dict[str, str] = {}
    listener_at = ""
    for plane, exchange in answers:
        why = refusal(plane, exchange, credentials)
        if why is not None and plane not in found:
            found[plane] = why
            if plane == LISTENER and exchange is not None:
                parts = urlsplit(exchange.request.url)
                listener_at = f"{parts.scheme}://{parts.netloc}"
    given = credentials or Credentials()
    inherited = given.plane(FRONTEND).headers == given.plane(LISTENER).headers
    if FRONTEND in found and LISTENER in found and inherited:
        del found[LISTENER]
        found[FRONTEND] += (
            f" (and so does the RL listener at {listener_at}, which receives the frontend's "
            "credentials)"
        )
    if found:
        raise AuthRefused("; and ".join(found.values()))
