"""A refusal says what the server's `WWW-Authenticate` challenge says (RFC 6750 `error` and
`error_description`): an expired token is told apart from a wrong one."""

from __future__ import annotations

import pytest

from rl_conformance.client.refusals import challenge
from rl_conformance.wire.exchange import Exchange, WireRequest


def refused(header: str | None) -> Exchange:
    exchange = Exchange(request=WireRequest("GET", "https://gw/v1/models", {}))
    exchange.status = 401
    exchange.headers = {} if header is None else {"www-authenticate": header}
    return exchange


@pytest.mark.parametrize(
    ("header", "said"),
    [
        (
            'Bearer realm="gw", error="invalid_token", error_description="The token expired"',
            ", saying invalid_token: The token expired",
        ),
        ('Bearer error="invalid_token"', ", saying invalid_token"),
        ('Bearer realm="ingress"', ""),
        (None, ""),
    ],
)
def test_the_challenge_is_quoted(header: str | None, said: str) -> None:
    assert challenge(refused(header)) == said
