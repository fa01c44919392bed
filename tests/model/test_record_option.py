"""`--record KEY=VALUE`: what a deployment does not publish, said by the user, from the one table
of options to `matrix.json` `recorded` (marked `--record`, never as observed); a value it cannot
read is refused before anything starts, naming the flag and the value."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from rl_conformance.checks import schema_check
from rl_conformance.errors import ConfigurationError
from rl_conformance.model.config import RunConfig, parse_records
from rl_conformance.model.matrix import RunInfo, build_matrix, now
from rl_conformance.model.options import add_arguments


def test_records_parse_in_the_order_given() -> None:
    assert parse_records(["vllm=0.11.0", "gpu.model = H100 80GB ", "image=nvcr.io/a/b:1=2"]) == {
        "vllm": "0.11.0",
        "gpu.model": "H100 80GB",
        "image": "nvcr.io/a/b:1=2",  # the first '=' splits
    }
    assert parse_records(["a=1", "a=1"]) == {"a": "1"}  # the same fact twice is one fact


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ("vllm", "expected KEY=VALUE, observed 'vllm' (no '=')"),
        ("=0.11.0", "expected a KEY before '=', observed '=0.11.0' (empty key)"),
        ("vllm=", "expected a VALUE after '=', observed 'vllm=' (empty value)"),
        ("vllm version=1", "observed 'vllm version' in 'vllm version=1'"),
        ("-x=1", "observed '-x'"),
        ("k=a\nb", "expected a VALUE of one line"),
        ("k=" + "x" * 300, "expected a VALUE of one line of at most 200 characters"),
    ],
)
def test_a_record_it_cannot_read_is_refused_naming_the_flag_and_value(item: str, says: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        RunConfig(record=(item,)).validate()
    assert str(raised.value).startswith("--record: ")
    assert says in str(raised.value)


def test_one_key_with_two_values_is_refused() -> None:
    twice = r"'vllm' given twice .* '0\.11\.0' and '0\.12\.0'"
    with pytest.raises(ConfigurationError, match=twice):
        parse_records(["vllm=0.11.0", "vllm=0.12.0"])


def test_the_flag_is_repeatable_and_crosses_to_the_plugin_and_back() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = RunConfig.from_options(
        parser.parse_args(["--record", "vllm=0.11.0", "--record", "gpu=H100"])
    ).validate()
    assert config.recorded() == {"vllm": "0.11.0", "gpu": "H100"}
    arguments = config.pytest_arguments()
    assert arguments == ["--rl-record", "vllm=0.11.0", "--rl-record", "gpu=H100"]


def test_recorded_facts_are_in_the_matrix_marked_as_given_and_validate() -> None:
    info = RunInfo(now(), now(), True, 0, recorded={"vllm": "0.11.0", "gpu": "H100"})
    document = build_matrix([], [], [], info).to_json()
    assert document["recorded"] == {
        "vllm": {"value": "0.11.0", "source": "--record"},
        "gpu": {"value": "H100", "source": "--record"},
    }
    result = schema_check("matrix", document)
    assert result.passed, result.explain()
    assert "recorded" not in build_matrix([], [], [], RunInfo(now(), now(), True, 0)).to_json()


@pytest.mark.slow
def test_the_command_refuses_a_bad_record_before_starting_anything(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rl_conformance", "run", "--report-dir", str(tmp_path), "--record",
         "vllm"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "--record: expected KEY=VALUE, observed 'vllm'" in done.stderr + done.stdout
    assert not (tmp_path / "matrix.json").exists()  # refused before the run started
