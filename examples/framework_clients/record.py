"""Record a real framework client's evidence for CI: one live certification, kept.

    RL_CONFORMANCE_VERL_DYNAMO=path/to/dynamo_async_server.py \\
        python -m examples.framework_clients.record verl-dynamo-generation

runs `rl-conformance certify-adapter <shim> --family <family> --keep-evidence` for the client
named in `fixtures/framework_clients/sources.json` (its shim and family; the client's
environment variable must point to its pinned source) and writes each scenario's evidence,
`evidence/<adapter>--<scenario>.json`, as `fixtures/framework_clients/recorded/<client>/
<scenario>.json` (compact JSON and a newline, as the recordings are kept). The run's report
stays in `--report-dir` (default: a temporary directory, printed) for reading matrix.md and
the audit logs; the reviewed verdicts in `fixtures/expected/framework-clients.json` are
written by hand from them. Nothing is recorded when a scenario could not run (an error).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .upstream import SOURCES, pinned

RECORDED = SOURCES.parent / "recorded"


def record(client: str, report_dir: Path) -> list[Path]:
    entry = pinned(client)
    missing = [variable for variable in entry["environment"] if not os.environ.get(variable)]
    if missing:
        raise SystemExit(f"{client}: set {', '.join(missing)} ({entry['environment']})")
    command = [
        sys.executable,
        "-m",
        "rl_conformance",
        "certify-adapter",
        entry["shim"],
        "--family",
        entry.get("family", "vllm"),
        "--keep-evidence",
        "--report-dir",
        str(report_dir),
        "-q",
    ]
    subprocess.run(command, check=False)  # exit 1 when the client fails an item: expected
    audits = [json.loads(p.read_text()) for p in sorted((report_dir / "audit").glob("*.json"))]
    errors = [a["scenario"] for a in audits if a.get("error")]
    if not audits or errors:
        raise SystemExit(f"{client}: nothing recorded; scenarios that could not run: {errors}")
    target = RECORDED / client
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted((report_dir / "evidence").glob("*--*.json")):
        document = json.loads(path.read_text())
        assert document["adapter"] == entry["shim"], path
        out = target / f"{document['scenario']}.json"
        out.write_text(json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n")
        written.append(out)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("client", help="a client of fixtures/framework_clients/sources.json")
    parser.add_argument("--report-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    report_dir = args.report_dir or Path(tempfile.mkdtemp(prefix=f"record-{args.client}-"))
    written = record(args.client, report_dir)
    print(f"{len(written)} recordings in {RECORDED / args.client}; report in {report_dir}")


if __name__ == "__main__":
    main()
