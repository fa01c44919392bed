"""Real framework clients, certified: Prime-RL's Dynamo administration and NeMo RL's Dynamo
generation (cited and pinned in fixtures/framework_clients/sources.json).

Their recordings (the whole evidence of every scenario, taken from a live run of each client's
own code through its shim) are judged again here by the current checklist, and must give the
reviewed verdicts (fixtures/expected/framework-clients.json): the clients' true defects as
`fail`, nothing as an error. Where a client's pinned source is at hand (its environment
variable), the live certification runs too and must agree.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from examples.framework_clients.upstream import SourceUnavailable
from rl_conformance.certify.checklist import CHECKS, half_of
from rl_conformance.certify.fleets import FLEETS
from rl_conformance.certify.replay import FORMAT, rejudge
from rl_conformance.certify.runner import run_scenario
from rl_conformance.certify.scenarios import SCENARIOS, scenario

from .cli_runs import certify

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SOURCES = json.loads((ROOT / "fixtures" / "framework_clients" / "sources.json").read_text())
REVIEWED = json.loads((ROOT / "fixtures" / "expected" / "framework-clients.json").read_text())
RECORDED = ROOT / "fixtures" / "framework_clients" / "recorded"
CLIENTS = sorted(SOURCES["clients"])


def _recordings(client: str) -> dict[str, dict[str, Any]]:
    return {
        path.stem: json.loads(path.read_text())
        for path in sorted((RECORDED / client).glob("*.json"))
    }


@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_is_cited_and_pinned(client: str) -> None:
    entry = SOURCES["clients"][client]
    assert entry["repository"].count("/") == 1 and len(entry["commit"]) == 40
    assert entry["licence"] == "Apache-2.0"
    assert all(len(digest) == 64 for digest in entry["files"].values())
    assert set(entry["implements"]) <= {"generation", "refresh"}
    assert set(REVIEWED["clients"][client]["defects"])  # each has its reviewed defects


def test_every_client_is_recorded_and_reviewed() -> None:
    recorded = {path.name for path in RECORDED.iterdir() if path.is_dir()}
    assert recorded == set(CLIENTS)
    assert set(REVIEWED["clients"]) == set(CLIENTS)


@pytest.mark.parametrize("client", CLIENTS)
def test_the_recordings_give_the_reviewed_verdicts(client: str) -> None:
    recordings = _recordings(client)
    fleet = FLEETS[_family(client)]
    implements = set(SOURCES["clients"][client]["implements"])
    staged = {
        s.name
        for s in SCENARIOS
        if s.unsupported(fleet, frozenset(implements)) is None
        and s.applies_to(frozenset(implements)) is None
    }
    assert set(recordings) == staged, "a scenario its fleet stages for the client was not recorded"
    failures: dict[str, list[str]] = {}
    for name, document in recordings.items():
        assert document["format"] == FORMAT
        assert document["adapter"] == SOURCES["clients"][client]["shim"]
        findings = rejudge(document)
        assert [f.check_id for f in findings] == list(CHECKS)
        for finding in findings:
            if half_of(finding.check_id) not in implements:
                assert finding.outcome == "not-applicable", (name, finding)
        failed = sorted(f.check_id for f in findings if f.outcome == "fail")
        if failed:
            failures[name] = failed
    reviewed = REVIEWED["clients"][client]
    assert failures == reviewed["failures"]
    assert {item for items in failures.values() for item in items} == set(reviewed["defects"])


@pytest.mark.parametrize("client", CLIENTS)
def test_a_shim_without_its_source_names_the_variable(
    client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = SOURCES["clients"][client]
    (variable,) = entry["environment"]
    monkeypatch.delenv(variable, raising=False)
    module_name, _, name = entry["shim"].partition(":")
    module = importlib.import_module(module_name)
    module.load.forget()  # a source loaded earlier in this process
    result = run_scenario(client, getattr(module, name), scenario("iteration"))
    assert result.error is not None and variable in result.error
    assert entry["repository"] in result.error and entry["commit"] in result.error


def test_a_source_other_than_the_pinned_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from examples.framework_clients.upstream import source_text

    changed = tmp_path / "dynamo_admin.py"
    changed.write_text("# not the pinned file\n")
    monkeypatch.setenv("RL_CONFORMANCE_PRIME_RL_ADMIN", str(changed))
    with pytest.raises(SourceUnavailable, match="sha256 expected 70de7759"):
        source_text("prime-rl-dynamo-admin", "RL_CONFORMANCE_PRIME_RL_ADMIN")


def _at_hand() -> list[str]:
    return [
        client
        for client in CLIENTS
        if all(os.environ.get(v) for v in SOURCES["clients"][client]["environment"])
    ]


def test_live_certification_agrees_with_the_recordings(tmp_path: Path) -> None:
    clients = _at_hand()
    if not clients:
        variables = [v for c in CLIENTS for v in SOURCES["clients"][c]["environment"]]
        pytest.skip(
            f"no framework source at hand ({', '.join(variables)} unset): the recordings "
            "stand for the live run"
        )
    for family in sorted({_family(client) for client in clients}):
        chosen = [client for client in clients if _family(client) == family]
        shims = [SOURCES["clients"][client]["shim"] for client in chosen]
        directory = tmp_path / family
        _, matrix, audits = certify(directory, *shims, "--family", family, "--jobs", "6")
        for client, shim in zip(chosen, shims, strict=True):
            mine = [audit for audit in audits if audit["adapter"] == shim]
            observed = {
                audit["scenario"]: sorted(
                    f["check"] for f in audit["findings"] if f["outcome"] == "fail"
                )
                for audit in mine
            }
            assert all(audit["error"] is None for audit in mine)
            reviewed = REVIEWED["clients"][client]["failures"]
            assert {k: v for k, v in observed.items() if v} == reviewed, client
        assert "error" not in {
            cell["outcome"] for row in matrix["capabilities"] for cell in row["cells"].values()
        }


def _family(client: str) -> str:
    """The administration family of the fleet the client is certified on."""
    return str(SOURCES["clients"][client].get("family", "vllm"))
