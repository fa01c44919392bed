"""Where new weights come from: checkpoints, transfers (`--weight-transfer`), or, for our fakes
only, made-up ones; refusals and missing inputs name the flag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl_conformance.control.admin import AdminWorker
from rl_conformance.control.families import VLLM, VLLM_SIDECAR
from rl_conformance.control.weights import WeightSource
from rl_conformance.errors import ConfigurationError
from rl_conformance.model.config import RunConfig
from rl_conformance.model.mutations import MutationPolicy, MutationRefused
from rl_conformance.model.target import Target
from rl_conformance.model.verdict import MissingInput
from rl_conformance.model.weight_transfer import load_weight_transfer

REAL = Target(id="real", backend="vllm", kind="external", frontend_url="http://x")
FAKE = Target(id="fake-vllm", backend="vllm", kind="fake", frontend_url="http://x")
ALLOWED = MutationPolicy(allowed=True)


def write(tmp_path: Path, name: str, document: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "expected a JSON object with init_info and update_info, observed list"),
        ({"init_info": [], "update_info": [{}]}, "init_info: expected an object, observed list"),
        ({"init_info": {}, "update_info": []}, "update_info: expected a non-empty list"),
        ({"init_info": {}, "update_info": {}}, "update_info: expected a non-empty list"),
        ({"init_info": {}, "update_info": [[1]]}, "update_info[0]: expected an object"),
        ({"init_info": {}, "update_info": [{}], "x": 1}, "unknown field(s) ['x']"),
    ],
)
def test_bad_transfer_files_name_the_field(tmp_path: Path, document: object, message: str) -> None:
    path = write(tmp_path, "t.json", document)
    with pytest.raises(ConfigurationError, match="--weight-transfer") as raised:
        load_weight_transfer(path)
    assert message in str(raised.value)
    with pytest.raises(ConfigurationError):
        RunConfig(weight_transfer=(path,)).validate()


def test_unreadable_and_invalid_json(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot be read"):
        load_weight_transfer(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigurationError, match="not JSON"):
        load_weight_transfer(str(tmp_path / "bad.json"))


def test_real_targets_need_inputs_and_fakes_do_not(tmp_path: Path) -> None:
    for family, flag in ((VLLM, "--update-model-path"), (VLLM_SIDECAR, "--weight-transfer")):
        with pytest.raises(MissingInput, match=flag):
            WeightSource(ALLOWED, REAL).new(family)
        assert WeightSource(ALLOWED, FAKE).new(family).version.startswith("conformance-")
    with pytest.raises(MutationRefused, match="--allow-mutations"):
        WeightSource(MutationPolicy(), FAKE).new(VLLM_SIDECAR)


def test_given_transfers_alternate_and_setup_happens_once(tmp_path: Path) -> None:
    first = load_weight_transfer(
        write(tmp_path, "a.json", {"init_info": {}, "update_info": [{"n": 1}]})
    )
    second = load_weight_transfer(
        write(tmp_path, "b.json", {"init_info": {}, "update_info": [{"n": 2}]})
    )
    source = WeightSource(ALLOWED, REAL, transfers=(first, second))
    picked = [source.new(VLLM_SIDECAR).transfer for _ in range(3)]
    assert picked == [first, second, first]
    worker = AdminWorker(1, "http://w", ())
    assert source.needs_setup(worker)
    source.setup_done(worker)
    assert not source.needs_setup(worker)
    assert source.needs_setup(AdminWorker(2, "http://v", ()))
