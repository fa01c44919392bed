"""Several deployments given by URL in one plan: one column each, named for its table; each with
its own credentials, its own mutation policy and its own checkpoints; two with one column id
refused before anything starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rl_conformance.errors import ConfigurationError
from rl_conformance.launchers.run_plan import plan_run
from rl_conformance.model.config import RunConfig
from rl_conformance.redaction import REDACTOR

FLEETS = """
[vllm-prod]
frontend = "http://vllm.example:8000"
rl_url = "http://vllm.example:8001"
backend = "vllm"
allow_mutations = true
workers = [11]
update_model_paths = ["/ckpt/a", "/ckpt/b"]
admin_token_env = "VLLM_ADMIN"

[sglang-prod]
frontend = "http://sglang.example:8000"
rl_url = "http://sglang.example:8001"
backend = "sglang"
token_env = "SGLANG_TOKEN"
"""


@pytest.fixture(autouse=True)
def tokens(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SGLANG_TOKEN", "sglang-token-0123456789")
    monkeypatch.setenv("VLLM_ADMIN", "vllm-admin-0123456789")
    yield
    REDACTOR.forget()


def fleets(tmp_path: Path, text: str = FLEETS) -> str:
    path = tmp_path / "fleets.toml"
    path.write_text(text)
    return str(path)


def sent(plan_credentials: object, url: str) -> dict[str, str]:
    return {s.name: s.value for s in plan_credentials.apply(url).headers}  # type: ignore[attr-defined]


def test_each_table_is_a_column_with_its_own_credentials(tmp_path: Path) -> None:
    plan = plan_run(RunConfig(targets=fleets(tmp_path)))
    assert plan.pool.ids == ["vllm-prod", "sglang-prod"]  # no default fakes beside them
    assert {launcher.kind for launcher in plan.pool.launchers.values()} == {"external"}
    vllm, sglang = plan.credentials_for("vllm-prod"), plan.credentials_for("sglang-prod")
    assert sent(sglang, "http://sglang.example:8000/v1/models") == {
        "Authorization": "Bearer sglang-token-0123456789"
    }
    assert sent(vllm, "http://vllm.example:8000/v1/models") == {}
    worker = "http://10.0.0.7:9090/engine/pause_generation"  # a worker discovery lists
    assert sent(vllm, worker) == {"Authorization": "Bearer vllm-admin-0123456789"}
    assert sent(sglang, worker) == {}, "one fleet's admin token never goes to another's workers"


def test_each_table_says_which_of_its_workers_may_change(tmp_path: Path) -> None:
    plan = plan_run(RunConfig(targets=fleets(tmp_path), fake=("vllm",)))
    vllm = plan.policy_for("external", "vllm-prod")
    sglang = plan.policy_for("external", "sglang-prod")
    assert vllm.permits(11) and not vllm.permits(12)
    assert not sglang.allowed and "in " in sglang.how and "[sglang-prod]" in sglang.how
    assert str(sglang.refusal("weight updates")).startswith("read-only deployment: weight updates")
    assert plan.read_only_targets() == {"sglang-prod"}  # our fake may be changed, as always
    with pytest.raises(ConfigurationError, match=r"\[vllm-prod\] allow_mutations and --read-only"):
        plan_run(RunConfig(targets=fleets(tmp_path), read_only=True))
    reader = fleets(tmp_path, '[a]\nfrontend = "http://a:8000"\nbackend = "vllm"\n')
    plan = plan_run(RunConfig(targets=reader, fake=("vllm",), read_only=True))
    assert plan.read_only_targets() == {"a", "fake-vllm"}


def test_the_flags_grant_never_reaches_a_table(tmp_path: Path) -> None:
    granted = RunConfig(targets=fleets(tmp_path), fake=("vllm",), allow_mutations=True, worker=(5,))
    plan = plan_run(granted)
    assert plan.policy_for("fake", "fake-vllm").workers == frozenset({5})
    assert not plan.policy_for("external", "sglang-prod").allowed
    assert plan.policy_for("external", "vllm-prod").workers == frozenset({11})


def test_each_table_updates_to_its_own_checkpoints(tmp_path: Path) -> None:
    plan = plan_run(
        RunConfig(
            targets=fleets(tmp_path),
            launch="dynamo-mocker",
            update_model_path=("/launched/a", "/launched/b"),
        )
    )
    assert plan.inputs_for("vllm-prod").update_model_path == ("/ckpt/a", "/ckpt/b")
    assert plan.inputs_for("sglang-prod").update_model_path == ()
    assert plan.inputs_for("dynamo-mocker").update_model_path == ("/launched/a", "/launched/b")


@pytest.mark.parametrize(
    ("config", "table"),
    [
        ({"fake": ("vllm",)}, "fake-vllm"),
        ({"frontend": "http://x:8000", "backend": "vllm"}, "external-vllm"),
    ],
)
def test_two_deployments_with_one_column_are_refused(
    tmp_path: Path, config: dict[str, object], table: str
) -> None:
    text = f'[{table}]\nfrontend = "http://y:8000"\nbackend = "vllm"\n'
    with pytest.raises(ConfigurationError, match=f"have the column {table}: name the table"):
        plan_run(RunConfig(targets=fleets(tmp_path, text), **config))  # type: ignore[arg-type]


def test_the_pytest_options_rebuild_the_same_targets(tmp_path: Path) -> None:
    """A parallel run's workers rebuild the plan from `--rl-targets FILE`."""
    config = RunConfig(targets=fleets(tmp_path))
    assert config.pytest_arguments() == ["--rl-targets", fleets(tmp_path)]


def test_a_wrong_input_a_table_gave_is_named_by_its_key() -> None:
    """What a deployment shows of itself is compared with its table, and the message names the
    key to fix (the flags' deployment names the flag)."""
    from rl_conformance.launchers import inputs
    from rl_conformance.model.deployment import Naming

    table = Naming("fleets.toml", "vllm-prod")
    url = "http://h:8000/v1/models"
    assert inputs.model_problem("qwen", ["toy"], url, table) == (
        'fleets.toml [vllm-prod] model qwen is not served (give model = "toy"): GET '
        f"{url} lists toy"
    )
    assert inputs.model_problem("qwen", ["toy"], url) == (
        f"--model qwen is not served (give --model toy): GET {url} lists toy"
    )
    sglang = {"workers": [{"routes": ["continue_generation"]}]}
    said = inputs.backend_problem("vllm", sglang, url, table) or ""
    assert said.startswith(
        "fleets.toml [vllm-prod] backend vllm is contradicted by discovery "
        '(give backend = "sglang")'
    )
