"""A deployment that refuses the suite for want of credentials: an answer of 401 or 403.

No exchange of the serving contract is answered 401 or 403: such an answer says the deployment
authenticates its clients and the run's credentials are missing, wrong or expired, so nothing
it answers says anything of the contract. The client raises `CredentialsRefused` for it, naming
the plane and the flags that give that plane's credentials (`model.credentials.PLANES`) and,
when some were given, which; and refuses the plane in its breaker, so every later request to it
raises the same at once. Before any test, the preflight turns it into a target not reached
(`launchers.refusals`); during the run (a token that expired), the target is not reached from
then on (`TargetPool.release`). Either way no cell is `fail`, the run exits 3, and `diff` and
`baseline` call it not comparable.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from ..model.credentials import FRONTEND, Credentials
from ..model.matrix import Evidence
from ..wire.exchange import Exchange
from .breaker import PlaneRefused

REFUSALS = {401: "401 Unauthorized", 403: "403 Forbidden"}
CHECK_ID = "input.credentials"


class CredentialsRefused(PlaneRefused):
    """A plane answered 401 or 403: its credentials are missing, wrong or expired. `plane` is
    its `model.credentials` key, `origin` where it answered."""

    def __init__(
        self, reason: str, evidence: tuple[object, ...] = (), plane: str = "", origin: str = ""
    ) -> None:
        super().__init__(reason, evidence)
        self.plane = plane
        self.origin = origin


CHALLENGE_PARAMETER = re.compile(r'\b(error|error_description)\s*=\s*"([^"\r\n]{1,200})"')


def challenge(exchange: Exchange) -> str:
    """What the server's `WWW-Authenticate` says of the refusal (RFC 6750's `error` and
    `error_description`: an expired token is told so), as `, saying invalid_token: ...`."""
    found = dict(CHALLENGE_PARAMETER.findall(exchange.headers.get("www-authenticate", "")))
    said = ": ".join(found[key] for key in ("error", "error_description") if key in found)
    return f", saying {said}" if said else ""


def refusal(exchange: Exchange, credentials: Credentials) -> CredentialsRefused | None:
    """The refusal `exchange` is (see the module); None for any other answer."""
    if exchange.status not in REFUSALS:
        return None
    found, _ = credentials.route(exchange.request.url)
    plane = found or credentials.plane(FRONTEND)  # an unnamed path of the frontend's origin
    flags = plane.flags
    parts = urlsplit(exchange.request.url)
    origin = f"{parts.scheme}://{parts.netloc}"
    where = f"the {flags.title} at {origin}"
    answered = f"{exchange.request.method} {parts.path} answered HTTP {REFUSALS[exchange.status]}"
    answered += challenge(exchange)
    given = plane.given()
    if not given:
        why = (
            f"{where} refuses requests without credentials ({answered}): give them with {flags.how}"
        )
    elif exchange.status == 401:
        why = (
            f"{where} refused the credentials given ({given}; {answered}): give valid ones with "
            f"{flags.how}"
        )
    else:
        why = (
            f"{where} refused access to the credentials given ({given}; {answered}): give ones "
            f"allowed these requests with {flags.how}"
        )
    evidence = Evidence(
        CHECK_ID,
        why,
        "status",
        "an answer of the serving contract (never 401 or 403)",
        f"HTTP {exchange.status}: {exchange.body_preview()}",
        exchange.curl(),
        exchange.wire_log(),
    )
    return CredentialsRefused(why, (evidence,), plane.key, origin)
