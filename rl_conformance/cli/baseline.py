"""`rl-conformance baseline BASELINE_DIR REPORT_DIR`: a nightly's comparison with the last
kept matrix, and the rule for keeping the next one, in one place for every scheduler (the
GitHub workflow and the Kubernetes CronJob in deploy/ both call it).

A baseline is only ever a comparable run: one that completed and reached every target. A run
that did not (the preflight refused an input, a plane refused the credentials, the deployment
did not answer, --run-timeout, SIGINT or SIGTERM cut it, or it wrote no matrix at all) is not
comparable: its first line names the cause, nothing it did not judge is reported as a
regression, and it exits 3 unless a cell it did judge regressed.

- No comparable baseline yet (the first night, or a kept matrix that is not comparable): the
  first comparable night becomes the baseline whatever its outcomes (its failures are the known
  ones from then on) and exits with the run's own status, so known failures are reported once.
  A night that is not comparable keeps nothing and exits 3.
- Otherwise the two are compared as `diff` does (a cut run's cells it reached are compared, the
  others are not run); the new matrix replaces the baseline only when it is comparable and
  nothing regressed (a regression keeps being reported every night until it is fixed). Exit as
  `diff` does: 1 on a regression (or coverage lost, with --fail-on-coverage-loss), else 3 when
  the night is not comparable, else 0."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from ..model.baseline import diff_matrices, load_matrix, render_diff
from ..model.comparability import Comparability, of_matrix
from ..model.exits import EXIT_FAILED, EXIT_UNREACHED

BASELINE_FILE = "matrix.json"


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "baseline",
        help="compare a nightly run with the kept baseline, and keep it as the next when it may",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "baseline", type=Path, metavar="BASELINE_DIR", help="where the kept matrix.json lives"
    )
    parser.add_argument("report", type=Path, metavar="REPORT_DIR", help="the run's --report-dir")
    parser.add_argument("--markdown", action="store_true", help="Markdown (a CI step summary)")
    parser.add_argument(
        "--fail-on-coverage-loss",
        action="store_true",
        help="exit 1 also when coverage was lost (as diff does)",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    current = args.report / "matrix.json"
    kept = args.baseline / BASELINE_FILE
    if not current.is_file():
        print(
            f"not comparable: no matrix was written in {args.report} (the run refused its "
            f"command line or stopped before it began: see its output); the baseline is "
            f"unchanged (exit {EXIT_UNREACHED})"
        )
        return EXIT_UNREACHED
    new = load_matrix(current)
    tonight = of_matrix(new)
    old = load_matrix(kept) if kept.is_file() else None
    if old is None or not of_matrix(old).comparable:
        return _seed(new, tonight, current, kept, None if old is None else of_matrix(old))
    result = diff_matrices(old, new, fail_on_coverage_loss=args.fail_on_coverage_loss)
    print(render_diff(result, markdown=args.markdown), end="")
    if tonight.comparable and not result.regressions:
        _keep(current, kept)
        print(f"this matrix is the next baseline ({kept})")
    elif not tonight.comparable:
        print(f"the baseline is unchanged ({kept}): tonight is not comparable ({tonight.cause})")
    else:
        print(
            f"the baseline is unchanged ({kept}): {len(result.regressions)} regression(s) stay "
            "reported until fixed"
        )
    return result.exit_status


def _seed(
    new: dict[str, Any],
    tonight: Comparability,
    current: Path,
    kept: Path,
    stale: Comparability | None,
) -> int:
    """No comparable baseline: the first comparable night seeds it, whatever came before."""
    before = (
        "No baseline yet"
        if stale is None
        else f"The kept baseline ({kept}) is not comparable ({stale.sentence()})"
    )
    if not tonight.comparable:
        print(
            f"not comparable: NEW {tonight.sentence()}\n{before}, and tonight's run is not "
            f"comparable: nothing kept (exit {EXIT_UNREACHED})."
        )
        return EXIT_UNREACHED
    status = int(new.get("exit_status", EXIT_FAILED))
    summary = new.get("summary") or {}
    failing = int(summary.get("fail", 0)) + int(summary.get("error", 0))
    _keep(current, kept)
    print(
        f"{before}: this matrix is the baseline ({kept}); its {failing} fail or error cell(s) "
        f"are known from now on and fail this night only (exit {status})."
    )
    return status


def _keep(current: Path, kept: Path) -> None:
    kept.parent.mkdir(parents=True, exist_ok=True)
    scratch = kept.with_suffix(".json.new")
    shutil.copyfile(current, scratch)
    json.loads(scratch.read_text(encoding="utf-8"))  # a torn copy never replaces the baseline
    scratch.replace(kept)
