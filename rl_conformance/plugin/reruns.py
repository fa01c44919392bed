"""A test that ran while its worker was dying of an earlier test's call is run again, once.

A worker may die seconds after the answer that doomed it (SGLang answers a pause in a mode it
does not have `200 ok`, its scheduler asserts, the process goes ~5 s later). How many of the
next test's calls reach it before it goes depends on the machine's pace; what that test then
reports (its first call refused) is not a verdict on its capability. When `deaths` charges the
death to the earlier test, the later test's failure is set aside and the test is run again on
the restarted worker (or skipped, "not run: the worker died ...", where no restart is left): its
verdict no longer depends on when the worker went. Only the second run's reports are logged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from _pytest.runner import runtestprotocol

from ..model.matrix import Outcome, TestRecord


@dataclass
class Reruns:
    wanted: dict[str, TestRecord] = field(default_factory=dict)
    """Tests to run again, each with the earlier test's record its run amended."""
    running_again: dict[str, TestRecord] = field(default_factory=dict)

    def consider(self, record: TestRecord, amended: TestRecord) -> None:
        """After `record`'s test found the worker dead of `amended`'s call: a failure (or
        error) of it is run again, once."""
        failed = record.outcome in (Outcome.FAIL, Outcome.ERROR)
        if failed and record.nodeid not in self.running_again:
            self.wanted[record.nodeid] = amended

    def carried(self, nodeid: str) -> TestRecord | None:
        """The earlier record a test's second run reports along with its own (the first
        run's reports, which carried it, are not logged)."""
        return self.running_again.get(nodeid)


def run_protocol(item: pytest.Item, nextitem: pytest.Item | None, reruns: Reruns) -> bool:
    """pytest's protocol for one item (`_pytest.runner.pytest_runtest_protocol`), run a second
    time when the first run met a worker dying of an earlier test's call."""
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    amended = reruns.wanted.pop(item.nodeid, None)
    if amended is not None:
        reruns.running_again[item.nodeid] = amended
        try:
            reports = runtestprotocol(item, nextitem=nextitem, log=False)
        finally:
            reruns.running_again.pop(item.nodeid, None)
    for report in reports:
        ihook.pytest_runtest_logreport(report=report)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
