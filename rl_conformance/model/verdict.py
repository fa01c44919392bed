"""How a suite test turns check results into an outcome.

A test hands every `CheckResult` to its `Verdict`; the first failed result raises
`ConformanceFailure`, which carries the evidence (violations, the exchange and its curl reproducer)
to the matrix. More exceptions say a test could not apply: `FeatureAbsent` (the deployment does
not offer the feature; the matrix decides from the documented support whether that is a failure),
`NotAdvertised` (discovery does not advertise what the test needs), and `Inconclusive` (the test
cannot judge: an input the user did not give, `MissingInput`, or a channel the deployment does not
expose, `Unobservable`), which is `skipped` with the flag or the channel named, never a failure.
"""

from __future__ import annotations

import json
from typing import Any

from ..checks import http, schema_check
from ..checks.base import MISSING, CheckResult
from ..checks.stream_fold import StreamFold
from ..wire.exchange import BodyNotJSON, Exchange


class ConformanceFailure(AssertionError):
    def __init__(self, result: CheckResult, exchange: Exchange | None = None) -> None:
        self.result = result
        self.exchange = exchange
        text = result.explain()
        if exchange is not None:
            text += f"\n  exchange: {exchange.describe()}\n  reproduce: {exchange.curl()}"
        super().__init__(text)


class FeatureAbsent(Exception):
    """The deployment does not offer the feature under test (reason says what was observed)."""


class NotAdvertised(Exception):
    """Discovery does not advertise the route or worker the test needs."""


class Inconclusive(Exception):
    """The test cannot judge this deployment; the message says what would let it."""


class MissingInput(Inconclusive):
    """The user did not give an input the test needs (the message names the flag)."""


class Unobservable(Inconclusive):
    """The deployment does not expose the channel the observation needs (the message names it).
    Absent evidence is not evidence of an absent feature."""


class Verdict:
    """Collects the check results of one test. Deliberately not a dataclass: hypothesis prints
    falsifying arguments field by field, and a verdict holds every exchange of the test."""

    def __init__(self) -> None:
        self.results: list[tuple[CheckResult, Exchange | None]] = []
        self.measured: dict[str, Any] = {}
        self.differences: list[tuple[CheckResult, Exchange | None]] = []
        """Failed results of checks no normative sentence fixes (`CheckSpec.normative`): a
        release difference flagged on the cell, never a failure."""

    def __repr__(self) -> str:
        return f"Verdict({len(self.results)} check results)"

    def check(self, result: CheckResult, exchange: Exchange | None = None) -> CheckResult:
        self.results.append((result, exchange))
        if not result.passed and not result.spec.normative:
            self.differences.append((result, exchange))
        elif not result.passed:
            raise ConformanceFailure(result, exchange)
        return result

    def differs(self, result: CheckResult) -> bool:
        """Whether `result` is a release difference this verdict recorded: the test has
        nothing more to judge on that exchange."""
        return not result.passed and not result.spec.normative

    def measure(self, **facts: Any) -> None:
        """Keep facts the test measured on its record, whatever its outcome. They are JSON
        values: a field the deployment left out (`MISSING`) is kept as null, anything else as its
        text, so that no measurement can keep the report from being written."""
        self.measured.update(json.loads(json.dumps(facts, default=_json_fact)))

    def status(self, exchange: Exchange, expected: int = 200) -> None:
        self.check(
            http.status(exchange.status, expected, exchange.error, exchange.body_preview()),
            exchange,
        )

    def json(
        self, exchange: Exchange, *, schema: str | None = None, expected_status: int = 200
    ) -> Any:
        """Require the status, a JSON body and (optionally) a schema; return the parsed body."""
        self.status(exchange, expected_status)
        try:
            body = exchange.json()
            error = None
        except BodyNotJSON as exc:
            body, error = None, exc.detail
        self.check(http.json_body(error, exchange.body_preview()), exchange)
        if schema is not None:
            self.check(schema_check(schema, body), exchange)
        return body

    def events(self, exchange: Exchange, *, schema: str | None = None) -> list[Any]:
        """Require a 200 event stream (text/event-stream) whose every data event is JSON (or
        [DONE]); schema-check each JSON event; return the parsed payloads. Does not require
        terminal success. A stream longer than the client keeps whole raises `EventsElided`:
        judge it through `exchange.fold`."""
        self.status(exchange, 200)
        self.check(
            http.event_stream(exchange.content_type, exchange.event_count, exchange.body_preview()),
            exchange,
        )
        try:
            payloads = exchange.payloads()
            error = None
        except BodyNotJSON as exc:
            payloads, error = [], str(exc)
        self.check(http.json_body(error, exchange.body_preview(), what="stream event"), exchange)
        if schema is not None:
            for position, payload in enumerate(payloads):
                if isinstance(payload, dict) and "error" not in payload:
                    self.check(schema_check(schema, payload, where=f"events[{position}]"), exchange)
        return payloads

    def folded(self, exchange: Exchange) -> StreamFold:
        """`events` without a schema, for a stream judged as a whole: the same checks (a 200
        event stream whose every data event is JSON), read from the fold the client made as the
        stream arrived (`exchange.fold`) instead of parsing every event again."""
        fold = exchange.fold
        if not isinstance(fold, StreamFold) or fold.payloads != exchange.event_count:
            # not streamed by the client, or events it kept but never folded (the part of an
            # event a cut stream left): judged from the events themselves
            fold = StreamFold()
            for position, payload in enumerate(self.events(exchange)):
                fold.add(position, payload)
            return fold
        self.status(exchange, 200)
        self.check(
            http.event_stream(exchange.content_type, exchange.event_count, exchange.body_preview()),
            exchange,
        )
        error = None if fold.unparseable is None else fold.unparseable[1]
        self.check(http.json_body(error, exchange.body_preview(), what="stream event"), exchange)
        return fold


def _json_fact(value: Any) -> Any:
    return None if value is MISSING else repr(value)
