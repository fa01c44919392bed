"""`rl-conformance baseline BASELINE_DIR REPORT_DIR`: a nightly's comparison with the last
kept matrix, and the rule for keeping the next one, in one place for every scheduler (the
GitHub workflow and the Kubernetes CronJob in deploy/ both call it).

- No matrix in REPORT_DIR: exit 1, nothing kept.
- No baseline yet (the first night): this matrix becomes the baseline whatever its outcomes
  (its failures are the known ones from then on), if the run completed and reached every target
  (a target not reached, such as a deployment that refused the run's credentials, says nothing
  to compare later nights with); exit with the run's own status, so known failures are reported
  once.
- Otherwise the two are compared as `diff` does; the new matrix replaces the baseline only when
  the run completed, every target was reached and nothing regressed (a regression keeps being
  reported every night until it is fixed). Exit as `diff` does."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from ..model.baseline import diff_matrices, load_matrix, render_diff
from ..model.exits import EXIT_FAILED

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
        print(f"no matrix was written in {args.report}; the baseline is unchanged")
        return EXIT_FAILED
    new = load_matrix(current)
    if not kept.is_file():
        return _first_night(new, current, kept)
    result = diff_matrices(load_matrix(kept), new, fail_on_coverage_loss=args.fail_on_coverage_loss)
    print(render_diff(result, markdown=args.markdown), end="")
    if new.get("complete", True) and not result.not_comparable and not result.regressions:
        _keep(current, kept)
        print(f"this matrix is the next baseline ({kept})")
    else:
        print(f"the baseline is unchanged ({kept}): {_why_not_kept(new, result)}")
    return result.exit_status


def _first_night(new: dict[str, Any], current: Path, kept: Path) -> int:
    status = int(new.get("exit_status", EXIT_FAILED))
    summary = new.get("summary") or {}
    failing = int(summary.get("fail", 0)) + int(summary.get("error", 0))
    unreached = {t["id"]: t["unreached"] for t in new.get("targets", []) if t.get("unreached")}
    if unreached:
        target, cause = next(iter(sorted(unreached.items())))
        print(
            f"No baseline yet, and this run did not reach {target} ({cause}): nothing kept, "
            f"nothing comparable (exit {status})."
        )
    elif new.get("complete", True):
        _keep(current, kept)
        print(
            f"No baseline yet: this matrix is the baseline ({kept}); its {failing} fail or "
            f"error cell(s) are known from now on and fail this night only (exit {status})."
        )
    else:
        print(
            f"No baseline yet, and this run is incomplete ({new.get('incomplete_reason')}): "
            f"nothing kept (exit {status})."
        )
    return status


def _why_not_kept(new: dict[str, Any], result: Any) -> str:
    if not new.get("complete", True):
        return f"the run is incomplete ({new.get('incomplete_reason')})"
    if result.not_comparable:
        return "a target was not reached: " + ", ".join(sorted(result.not_comparable))
    return f"{len(result.regressions)} regression(s) stay reported until fixed"


def _keep(current: Path, kept: Path) -> None:
    kept.parent.mkdir(parents=True, exist_ok=True)
    scratch = kept.with_suffix(".json.new")
    shutil.copyfile(current, scratch)
    json.loads(scratch.read_text(encoding="utf-8"))  # a torn copy never replaces the baseline
    scratch.replace(kept)
