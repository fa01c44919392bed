"""`rl-conformance certify-adapter MODULE:FACTORY`: an RL framework's rollout client through
every certification scenario over a recorded fake fleet; writes the adapter matrix (checklist
items x adapters) as JSON, Markdown, JUnit XML and HTML, plus each scenario's audit log.

Exit 0 when every adapter under test (those named, and with `--reference` the reference
adapter) passes; the broken twins `--reference` adds are meant to fail, so their cells do not
count, but a twin that does not fail as reviewed (`fixtures/expected/adapter-twins.json`, in a
checkout) or cannot be run fails the self-check, and the command. Ctrl-C (SIGTERM) lets the
scenarios running end, writes what was judged (those not run are errors) and exits 130 (143)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from ..model.options import OVERWRITE_HELP
from ..redaction import write_text
from ..reports.directory import claim

EXIT_OK, EXIT_FAILED = 0, 1


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "certify-adapter",
        help="certify an RL framework's rollout client against the contract",
        description=__doc__,
    )
    parser.add_argument(
        "adapters",
        nargs="*",
        metavar="MODULE:FACTORY",
        help="adapter factories: callables taking an AdapterContext",
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="add the reference adapter and its broken twins as columns (the suite's self-check)",
    )
    parser.add_argument(
        "--family",
        choices=("vllm", "vllm-sidecar", "sglang"),
        default="vllm",
        help="the administration family of the certification fleet: the vLLM Python worker "
        "(default), vLLM's native sidecar with weight transfer, or SGLang workers reached by "
        "supplied URLs",
    )
    parser.add_argument(
        "--engine-route",
        action="append",
        default=None,
        metavar="DESCRIPTOR",
        help="with --family sglang: an engine route the client's deployment allowlists, in "
        "Dynamo's grammar path[=method][:engine|tm] (repeatable; the whole allowlist, as the "
        "deployment's --engine-route / DYN_SGLANG_ENGINE_ROUTES; default: flush_cache and "
        "get_weight_version)",
    )
    parser.add_argument(
        "--served-model",
        default=None,
        metavar="NAME",
        help="the model name the client's deployment serves and the client asks for (default: toy)",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="NAME",
        help="run only these scenarios (repeatable; default: all)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=4,
        metavar="N",
        help="scenarios run at once, each with its own fleet (default 4)",
    )
    parser.add_argument(
        "--keep-evidence",
        action="store_true",
        help="also write each scenario's whole evidence under evidence/, from which "
        "`rl_conformance.certify.replay.rejudge` judges it again without the adapter",
    )
    parser.add_argument(
        "--report-dir",
        default="adapter-report",
        metavar="DIR",
        help="where the adapter matrix and the audit logs are written (default ./adapter-report)",
    )
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress line per scenario, only the table"
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from ..certify.fleets import FLEETS, with_facts
    from ..certify.loading import load_factory
    from ..certify.runner import certify
    from ..certify.scenarios import SCENARIOS
    from ..certify.twins import (
        FAMILY_REFERENCES,
        FAMILY_TWINS,
        reviewed_failures,
        self_check_problems,
    )
    from ..reports import evidence, write_reports

    adapters = {spec: load_factory(spec) for spec in args.adapters}
    references = FAMILY_REFERENCES[args.family] if args.reference else {}
    twins = FAMILY_TWINS[args.family] if args.reference else {}
    adapters.update({**references, **twins})
    if not adapters:
        raise ConfigurationError("certify-adapter: name at least one MODULE:FACTORY or --reference")
    known = {scenario.name: scenario for scenario in SCENARIOS}
    unknown = [name for name in args.scenario if name not in known]
    if unknown:
        raise ConfigurationError(
            f"--scenario: unknown {', '.join(unknown)}; expected one of {', '.join(known)}"
        )
    chosen = [known[name] for name in args.scenario] or list(SCENARIOS)
    if args.jobs < 1:
        raise ConfigurationError(f"--jobs: expected at least 1, observed {args.jobs}")
    claim(Path(args.report_dir), overwrite=args.overwrite)
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    fleet = with_facts(FLEETS[args.family], args.engine_route, args.served_model)
    if args.reference and fleet != FLEETS[args.family]:
        raise ConfigurationError(
            "--reference: the reference adapter and its twins are reviewed on the kit's own "
            "fleet; run them without --engine-route and --served-model"
        )
    matrix, results = certify(adapters, chosen, progress, jobs=args.jobs, fleet=fleet)
    problems = [
        f"{result.adapter}: scenario {result.scenario.name} could not run: {result.error}"
        for result in results
        if result.error is not None and result.adapter not in twins
    ]
    if twins and matrix.run.complete:  # a stopped run's twins did not all run: no self-check
        problems += self_check_problems(results, [s.name for s in chosen], reviewed_failures())
    if twins or problems:
        matrix.exit_rule = replace(
            matrix.exit_rule,
            exempt=dict.fromkeys(twins, TWIN_EXEMPTION),
            problems=tuple(problems),
        )
    directory = Path(args.report_dir)
    document = matrix.to_json()
    write_reports(document, directory)
    audit = directory / "audit"
    audit.mkdir(parents=True, exist_ok=True)
    for result in results:
        path = audit / f"{_safe(result.adapter)}--{result.scenario.name}.json"
        write_text(path, json.dumps(result.to_json(), indent=2) + "\n")
        if args.keep_evidence and result.evidence is not None:
            kept = directory / "evidence" / path.name
            kept.parent.mkdir(parents=True, exist_ok=True)
            write_text(kept, json.dumps(result.evidence, indent=1) + "\n")
    artifacts = {spec: spec for spec in args.adapters}
    for name, adapter in {**references, **twins}.items():
        artifacts[name] = f"{adapter.__module__}:{adapter.__qualname__}"
    records = evidence.write_records(directory, document, None, artifacts)
    digest = evidence.seal(directory)
    print(_table(document))
    print(f"written to {directory / 'matrix.md'} (audit logs in {audit})")
    print(f"evidence: {', '.join(str(path) for path in records)} (dynamo.rl.validation.v1)")
    print(f"bundle.json sha256 {digest}")
    print(f"  (keep it: rl-conformance verify-bundle {directory} --sha256 <that digest>)")
    if not matrix.run.complete:
        print(
            f"rl-conformance: incomplete certification ({matrix.run.incomplete_reason}); the "
            "scenarios not run are errors in the report",
            file=sys.stderr,
        )
        return matrix.exit_status
    return EXIT_OK if matrix.exit_status == 0 else EXIT_FAILED


TWIN_EXEMPTION = (
    "a broken twin of the reference adapter, meant to fail: judged against its reviewed "
    "failures, not by its cells"
)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _table(document: dict[str, Any]) -> str:
    targets = [target["id"] for target in document["targets"]]
    exempt = (document.get("exit_rule") or {}).get("exempt") or {}
    widths = [max(len(t), 8) for t in targets]  # whole names: a column is an adapter
    lines = []
    for row in document["capabilities"]:
        outcomes = [row["cells"][t]["outcome"] for t in targets]
        cells = " ".join(f"{o:>{w}}" for o, w in zip(outcomes, widths, strict=True))
        lines.append(f"{row['id']:<36} {cells}")
        for target in targets:
            cell = row["cells"][target]
            if cell["outcome"] in ("fail", "error") or (
                cell["outcome"] == "skipped" and target not in exempt
            ):
                lines.append(f"    {target}: {cell['reason']}")
    header = f"{'adapter checklist item':<36} " + " ".join(
        f"{t:>{width}}" for t, width in zip(targets, widths, strict=True)
    )
    rule = document.get("exit_rule") or {}
    lines += [f"problem: {problem}" for problem in rule.get("problems", [])]
    return "\n".join([header, *lines])
