"""What `rl-conformance run` exits with, and what each status means: a script can tell a
deployment that broke the contract (1) from a deployment the run never reached (3), a wrong
command (2), a run that was stopped (124, 130, 143, as `timeout` and the shells count) and a
fleet the run could not leave as it found it (4), which outranks every other status."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHED = 3
EXIT_NOT_RESTORED = 4
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

MEANINGS: dict[int, str] = {
    EXIT_OK: "no cell is fail or error",
    EXIT_FAILED: "a cell is fail or error on a target the run reached",
    EXIT_USAGE: "a wrong command or input, found before anything started or by the preflight "
    "before any test (its cause is printed once, above)",
    EXIT_UNREACHED: "a target was not reached (its cause is printed once, above); nothing it "
    "was judged on failed",
    EXIT_NOT_RESTORED: "a worker the run mutated could not be put back as the run found it, or "
    "its verification disagreed (named on the first line, and in fleet_restore); whatever "
    "else happened",
    EXIT_TIMEOUT: "--run-timeout stopped the run; the matrix is incomplete",
    EXIT_INTERRUPTED: "interrupted (SIGINT, Ctrl-C); the matrix is incomplete",
    EXIT_TERMINATED: "terminated (SIGTERM); the matrix is incomplete",
}

TIMEOUT_PREFIX = "--run-timeout:"
SIGINT_REASON = "SIGINT: the run was interrupted (Ctrl-C)"
SIGTERM_REASON = "SIGTERM: the run was stopped"


def for_stop(reason: str | None) -> int:
    """The status of a run that did not complete, by the reason it stopped."""
    reason = reason or ""
    if reason.startswith(TIMEOUT_PREFIX):
        return EXIT_TIMEOUT
    if reason.startswith("SIGTERM"):
        return EXIT_TERMINATED
    if reason.startswith("SIGINT"):
        return EXIT_INTERRUPTED
    return EXIT_FAILED


def meaning(status: int) -> str:
    return MEANINGS.get(status, "the run could not produce a matrix")
