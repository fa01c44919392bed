"""A fake that behaves legally in an unusual way, judged against the plain fake: a run by URL of
each (read-only unless the flags allow mutations), and the cells the variant fails that the
plain fake does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_backends import FakeDeployment

from .test_launch_mode_equivalence import by_url, cells, run

Cells = dict[str, dict[str, Any]]
BAD = ("fail", "error")


def cells_by_url(fleet: FakeDeployment, directory: Path, *flags: str) -> Cells:
    return cells(run(directory, *by_url(fleet, workers=False), *flags))


def newly_failing(plain: Cells, variant: Cells) -> dict[str, tuple[str, str]]:
    """The capabilities the variant fails (or errs on) that the plain fake does not."""
    return {
        capability: (cell["outcome"], cell["reason"])
        for capability, cell in variant.items()
        if cell["outcome"] in BAD and plain[capability]["outcome"] not in BAD
    }
