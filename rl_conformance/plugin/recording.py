"""One test's outcome as a `TestRecord`: passed, failed with the evidence of the violated
rule, feature absent, not advertised, skipped with the reason, or an error of the harness."""

from __future__ import annotations

import traceback
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ..checks.base import CheckResult
from ..client.budget import is_generation
from ..client.reproducers import Reproduction, reproduce
from ..control.admin import RouteNotAdvertised
from ..model.matrix import Evidence, Outcome, TestRecord
from ..model.mutations import MutationRefused
from ..model.prompts import REFUSAL_STATUSES, PromptSpace
from ..model.verdict import ConformanceFailure, FeatureAbsent, Inconclusive, NotAdvertised, Verdict
from ..wire.exchange import Exchange, sequence_wire_log
from .collection import target_of
from .state import state_of

TELLING = (
    ConformanceFailure,
    FeatureAbsent,
    NotAdvertised,
    RouteNotAdvertised,
    MutationRefused,
    Inconclusive,
)


SEQUENCE_LIMIT = 20


def sequence_reproducer(exchanges: list[Exchange]) -> str | None:
    """The test's requests as a script of curl commands, oldest first (the last
    `SEQUENCE_LIMIT`); administration calls in it mutate the deployment when run."""
    if not exchanges:
        return None
    shown = exchanges[-SEQUENCE_LIMIT:]
    lines = [f"# {len(shown)} request(s) of the test, in order"]
    if len(exchanges) > len(shown):
        lines[0] += f" (the last {len(shown)} of {len(exchanges)})"
    lines += [exchange.curl() for exchange in shown]
    return "\n".join(lines)


def record_of(
    item: pytest.Item,
    call: pytest.CallInfo[None],
    report: pytest.TestReport,
    capabilities: tuple[str, ...],
    exchanges: list[Exchange] | None = None,
) -> TestRecord:
    record = TestRecord(
        nodeid=item.nodeid,
        capabilities=capabilities,
        target_id=target_of(item) or "?",
        outcome=Outcome.PASS,
        duration_s=call.duration,
    )
    verdict = getattr(item, "funcargs", {}).get("rl_verdict")
    if isinstance(verdict, Verdict):
        record.checks = [
            (result.check_id, result.passed)
            for result, _ in verdict.results
            if not verdict.differs(result)
        ]
        record.measured = dict(verdict.measured)
        record.differences = differences_of(verdict)
    if report.passed:
        return record
    error = most_telling(call.excinfo.value if call.excinfo else None)
    exchanges = exchanges or []
    sequence = sequence_reproducer(exchanges)
    if isinstance(error, FeatureAbsent):
        record.outcome, record.reason = Outcome.ABSENT, str(error)
        record.reproducer = sequence
        record.wire = sequence_wire_log(exchanges, sequence) if exchanges else None
    elif isinstance(error, NotAdvertised | RouteNotAdvertised):
        record.outcome, record.reason = Outcome.NOT_ADVERTISED, str(error)
    elif isinstance(error, MutationRefused | Inconclusive):
        record.outcome, record.reason = Outcome.SKIPPED, str(error)
    elif report.skipped:
        record.outcome, record.reason = Outcome.SKIPPED, skip_reason(report)
    elif (refused := prompts_refused(item)) is not None and suite_prompt_refused(error):
        record.outcome = Outcome.SKIPPED
        record.reason = f"not judged, the suite's prompt was refused: {refused}"
    elif isinstance(error, ConformanceFailure) and call.when == "call":
        record.outcome = Outcome.FAIL
        result = error.result
        record.reason = result.violations[0].message if result.violations else result.spec.title
        exchange = error.exchange
        reproducer = exchange.curl() if exchange is not None else sequence
        wire: dict[str, Any] | None
        if exchange is not None:
            wire = exchange.wire_log()
        else:  # several requests show it: the wire log of the whole sequence
            wire = sequence_wire_log(exchanges, sequence) if exchanges else None
        record.evidence = evidence_of(result, reproducer, wire)
        record.checks.append((result.check_id, False))
    elif isinstance(error, AssertionError) and call.when == "call":
        # A bare assert states the suite's own expectation (verdicts go through rl_verdict):
        # when it does not hold, the harness could not judge, so the test is an error.
        where, statement = assertion_site(error)
        expected = statement.removeprefix("assert ").strip()
        said = str(error).splitlines()[0] if str(error) else f"`{expected}` did not hold"
        record.outcome = Outcome.ERROR
        record.reason = f"call: the harness could not judge ({said}, at {where})"
        record.evidence = [
            Evidence(ASSERTION, record.reason, where, "the assertion holds", statement, sequence)
        ]
    else:
        record.outcome = Outcome.ERROR
        name = type(error).__name__ if error is not None else "error"
        record.reason = f"{call.when}: {name}: {error}"
        found = getattr(error, "evidence", ())  # a wrong input: what showed it
        record.evidence = [item for item in found if isinstance(item, Evidence)]
    return record


def differences_of(verdict: Verdict) -> list[Evidence]:
    """The release differences the verdict recorded, as evidence with their reproducer and wire
    log: what a reader needs to see the behaviour without a failure to point at it."""
    found = []
    for result, exchange in verdict.differences:
        reproducer = exchange.curl() if exchange is not None else None
        wire = exchange.wire_log() if exchange is not None else None
        found += evidence_of(result, reproducer, wire)
    return found


def evidence_of(result: CheckResult, reproducer: str | None, wire: Any) -> list[Evidence]:
    """Each violation of `result` as evidence, with what replays and shows it."""
    return [
        Evidence(
            result.check_id,
            violation.message,
            violation.field,
            violation.expected,
            violation.observed,
            reproducer,
            wire,
        )
        for violation in result.violations
    ]


def prompts_refused(item: pytest.Item) -> str | None:
    """Why the test's target refused the ids the suite's prompts use (`PromptSpace.refused`);
    None when it took them, or the target was never reached."""
    target = state_of(item.config).pool.started.get(target_of(item) or "")
    return None if target is None else PromptSpace.of(target.topology).refused


def suite_prompt_refused(error: BaseException | None) -> bool:
    """Whether a failure shows a generation request refused for its content (4xx): on a target
    that refused the ids the suite's prompts use, that is the suite's request at fault."""
    if not isinstance(error, ConformanceFailure) or error.exchange is None:
        return False
    request = error.exchange.request
    return error.exchange.status in REFUSAL_STATUSES and is_generation(request.method, request.url)


ASSERTION = "harness.assertion"
"""The evidence id of a suite's bare assert that did not hold."""


def assertion_site(error: AssertionError) -> tuple[str, str]:
    """Where a failed assert is (`file:line`) and its statement, from its traceback."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return "?", "assert"
    frame = frames[-1]
    return f"{Path(frame.filename).name}:{frame.lineno}", (frame.line or "assert").strip()


def most_telling(error: BaseException | None) -> BaseException | None:
    """The most telling exception, looking inside hypothesis' exception groups."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = most_telling(inner)
            if isinstance(found, TELLING):
                return found
        return most_telling(error.exceptions[0]) if error.exceptions else error
    return error


def skip_reason(report: pytest.TestReport) -> str:
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def show_as_skipped(item: pytest.Item, report: pytest.TestReport, record: TestRecord) -> None:
    """A test that could not apply is reported by pytest as skipped, with the reason; a call
    the record calls an error is marked so that pytest counts it as one (`status_of_call`)."""
    could_not_apply = (Outcome.ABSENT, Outcome.NOT_ADVERTISED, Outcome.SKIPPED)
    if record.outcome in could_not_apply and not report.skipped:
        report.outcome = "skipped"
        report.longrepr = (
            str(item.path),
            item.location[1] or 0,
            f"{record.outcome.value}: {record.reason}",
        )
    elif record.outcome is Outcome.ERROR and report.when == "call" and report.failed:
        report.user_properties.append((SHOWN_AS, "error"))


SHOWN_AS = "rl-conformance-shown-as"


def status_of_call(report: pytest.TestReport) -> tuple[str, str, str] | None:
    """pytest's status of a call whose record is an error: ERROR, as for an error in a setup,
    so that pytest's footer counts what the matrix counts (None: pytest decides)."""
    if report.when != "call" or not report.failed:
        return None
    if any(name == SHOWN_AS and value == "error" for name, value in report.user_properties):
        return "error", "E", "ERROR"
    return None


def verify_reproducers(records: Iterable[TestRecord]) -> None:
    """Re-send each failure's reproducer (one request per distinct reproducer) and note in the
    evidence whether it shows the same response."""
    seen: dict[str, Reproduction] = {}
    for record in records:
        for index, item in enumerate(record.evidence):
            if not item.reproducer or item.wire is None or item.reproduction is not None:
                continue
            if item.reproducer not in seen:
                seen[item.reproducer] = reproduce(item.reproducer, item.wire, record.capabilities)
            found = seen[item.reproducer]
            record.evidence[index] = replace(
                item, reproduced=found.reproduced, reproduction=found.detail
            )
