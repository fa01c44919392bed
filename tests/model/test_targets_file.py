"""A targets file: several deployments given by URL, one TOML table each, read into the same
`Deployment` the flags make and checked by the same rules, whose messages name the file, the
table and the key; credentials only by reference, a written one refused without being shown."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rl_conformance.errors import ConfigurationError
from rl_conformance.model.config import RunConfig
from rl_conformance.model.deployment import FILE_KEYS, Deployment
from rl_conformance.model.options import OPTIONS, add_arguments
from rl_conformance.model.targets_file import load_targets
from rl_conformance.redaction import REDACTOR

SECRET = "written-secret-5b7d1c9e0a"
TWO = """
[vllm-prod]
frontend = "http://vllm.example:8000"
rl_url = "http://vllm.example:8001"
backend = "vllm"
allow_mutations = true
workers = [7587886443219045121]
update_model_paths = ["ckpt/a", "/abs/b"]

[sglang-prod]
frontend = "http://sglang.example:8000"
backend = "sglang"
worker_urls = ["http://sglang-w0.example:9090"]
token_env = "SGLANG_TOKEN"
headers = ["X-Tenant: ${TENANT}", "@headers.txt"]
"""


@pytest.fixture(autouse=True)
def forget_secrets() -> Iterator[None]:
    yield
    REDACTOR.forget()


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SGLANG_TOKEN", "sglang-token-0123456789")
    monkeypatch.setenv("TENANT", "team-rl-42")
    (tmp_path / "headers.txt").write_text("X-Api-Key: header-file-key-987\n")
    return tmp_path


def written(directory: Path, text: str, name: str = "fleets.toml") -> str:
    path = directory / name
    path.write_text(text)
    return str(path)


def refused(text: str, directory: Path) -> str:
    with pytest.raises(ConfigurationError) as raised:
        RunConfig(targets=written(directory, text)).validate()
    message = str(raised.value)
    assert SECRET not in message
    return message


def flags(*argv: str) -> RunConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return RunConfig.from_options(parser.parse_args(list(argv)))


def test_each_table_is_a_deployment_named_for_its_column(in_tmp: Path) -> None:
    vllm, sglang = load_targets(written(in_tmp, TWO))
    assert (vllm.target_id, sglang.target_id) == ("vllm-prod", "sglang-prod")
    assert vllm.worker == (7587886443219045121,) and vllm.allow_mutations
    assert vllm.update_model_path == (str(in_tmp / "ckpt" / "a"), "/abs/b")  # the file's dir
    assert sglang.header[1] == f"@{in_tmp / 'headers.txt'}"
    assert sglang.worker_url == ("http://sglang-w0.example:9090",)
    config = RunConfig(targets=str(in_tmp / "fleets.toml")).validate()
    assert [d.target_id for d in config.deployments()] == ["vllm-prod", "sglang-prod"]


def test_a_relative_path_is_relative_to_the_file_wherever_the_run_starts(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (in_tmp / "fleet").mkdir()
    (in_tmp / "fleet" / "token").write_text("file-token-0123456789\n")
    path = written(
        in_tmp / "fleet",
        '[a]\nfrontend = "http://a:8000"\nbackend = "vllm"\ntoken_file = "token"\n',
    )
    monkeypatch.chdir("/")
    (deployment,) = load_targets(path)
    assert deployment.token_file == str(in_tmp / "fleet" / "token")
    sent = deployment.credentials().apply("http://a:8000/v1/models").headers
    assert [(s.name, s.value) for s in sent] == [("Authorization", "Bearer file-token-0123456789")]


def test_every_deployment_flag_has_a_key_named_for_it() -> None:
    """The keys are the flags' names, plural for a repeatable flag: one rule, no table to learn."""
    by_name = {option.name: option for option in OPTIONS}
    for name, key in FILE_KEYS.items():
        flag = by_name[name].flag.removeprefix("--").replace("-", "_")
        repeatable = by_name[name].kind in ("list", "int-list")
        assert key == flag + ("s" if repeatable else "")
    assert FILE_KEYS["worker"] == "workers" and FILE_KEYS["worker_url"] == "worker_urls"
    assert {field for field in Deployment.__dataclass_fields__} - {"naming", "name"} == set(
        FILE_KEYS
    )


@pytest.mark.parametrize(
    ("argv", "table", "flag_says", "file_says"),
    [
        (
            ["--update-model-path", "/a", "--allow-mutations", "--all-workers"],
            'update_model_paths = ["/a"]\nallow_mutations = true\nall_workers = true',
            "--update-model-path: expected two (consecutive updates alternate",
            "fleets.toml [t] update_model_paths: expected two (consecutive updates alternate",
        ),
        (
            ["--worker", "7"],
            "workers = [7]",
            "--worker/--all-workers choose targets for mutating calls: add --allow-mutations",
            "fleets.toml [t] workers/all_workers choose targets for mutating calls: add "
            "allow_mutations = true",
        ),
        (
            ["--allow-mutations"],
            "allow_mutations = true",
            "--allow-mutations needs --worker INSTANCE_ID (repeatable) or --all-workers",
            "fleets.toml [t] allow_mutations needs workers = [INSTANCE_ID] or all_workers = true",
        ),
        (
            ["--allow-mutations", "--worker", "7", "--all-workers"],
            "allow_mutations = true\nworkers = [7]\nall_workers = true",
            "--worker and --all-workers exclude each other",
            "fleets.toml [t] workers and all_workers exclude each other",
        ),
        (
            ["--update-model-path", "/a", "--update-model-path", "/b"],
            'update_model_paths = ["/a", "/b"]',
            "--update-model-path drive weight updates, mutating calls on the deployment at "
            "--frontend: add --allow-mutations with --worker INSTANCE_ID or --all-workers",
            "fleets.toml [t] update_model_paths drive weight updates, mutating calls on the "
            "deployment fleets.toml [t]: add allow_mutations = true with workers = "
            "[INSTANCE_ID] or all_workers = true in fleets.toml [t]",
        ),
        (
            ["--rl-url", "http://h:8000/"],
            'rl_url = "http://h:8000/"',
            "--rl-url http://h:8000/ is the --frontend URL",
            "fleets.toml [t] rl_url http://h:8000/ is the frontend URL",
        ),
        (
            ["--eos-token-id", "-1"],
            "eos_token_ids = [-1]",
            "--eos-token-id: expected a token id >= 0, observed -1",
            "fleets.toml [t] eos_token_ids: expected a token id >= 0, observed -1",
        ),
        (
            ["--worker-url", "ftp://w"],
            'worker_urls = ["ftp://w"]',
            "--worker-url: expected an http(s) URL, observed 'ftp://w'",
            "fleets.toml [t] worker_urls: expected an http(s) URL, observed 'ftp://w'",
        ),
        (
            ["--token-env", "NOT_SET_ANYWHERE_42"],
            'token_env = "NOT_SET_ANYWHERE_42"',
            "--token-env NOT_SET_ANYWHERE_42: the variable is not set in this environment",
            "fleets.toml [t] token_env NOT_SET_ANYWHERE_42: the variable is not set in this "
            "environment",
        ),
        (
            [
                *("--reference-checkpoint", "/no/such/ckpt", "--allow-mutations"),
                *("--all-workers", "--update-model-path", "/a", "--update-model-path", "/b"),
            ],
            'reference_checkpoints = ["/no/such/ckpt"]\nupdate_model_paths = ["/a", "/b"]\n'
            "allow_mutations = true\nall_workers = true",
            "--reference-checkpoint /no/such/ckpt: no such file or directory",
            "fleets.toml [t] reference_checkpoints /no/such/ckpt: no such file or directory",
        ),
    ],
)
def test_the_file_and_the_flags_are_held_to_the_same_rules(
    in_tmp: Path, argv: list[str], table: str, flag_says: str, file_says: str
) -> None:
    """Each rule refuses the flags naming the flag, and a table naming the file, table and key."""
    base = ["--frontend", "http://h:8000", "--backend", "vllm"]
    with pytest.raises(ConfigurationError) as by_flags:
        flags(*base, *argv).validate()
    assert flag_says in str(by_flags.value)
    text = f'[t]\nfrontend = "http://h:8000"\nbackend = "vllm"\n{table}\n'
    assert file_says in refused(text, in_tmp)


@pytest.mark.parametrize(
    ("table", "says"),
    [
        (f'headers = ["X-Api-Key: {SECRET}"]', "headers: a header's value is never written"),
        (f'rl_headers = ["{SECRET}"]', "rl_headers: a header's value is never written"),
        (f'token = "{SECRET}"', "token: a credential is never written in the targets file"),
        (f'api_key = "{SECRET}"', "api_key: a credential is never written"),
        (
            f'frontend = "http://h:8000/?key={SECRET}"\nsecret_query_params = ["key"]',
            "frontend: the value of the secret query parameter key is never written",
        ),
    ],
)
def test_a_credential_written_in_the_file_is_refused_in_one_sentence_never_shown(
    in_tmp: Path, table: str, says: str
) -> None:
    body = table if table.startswith("frontend") else f'frontend = "http://h:8000"\n{table}'
    message = refused(f'[t]\nbackend = "vllm"\n{body}\n', in_tmp)
    assert message.startswith("fleets.toml [t] ") and says in message
    assert message.count(". ") == 0, message


def test_credentials_by_reference_are_read_and_registered_as_their_references(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GW_KEY", "gateway-key-246813579")
    text = TWO.replace(
        'rl_url = "http://vllm.example:8001"',
        'rl_url = "http://vllm.example:8001/?key=${GW_KEY}"\nsecret_query_params = ["key"]',
    )
    vllm, sglang = load_targets(written(in_tmp, text))
    shown = {
        s.name: s.shown for s in sglang.credentials().apply("http://sglang.example:8000/v1").headers
    }
    assert shown["X-Tenant"] == "${TENANT}"
    assert shown["X-Api-Key"] == "$SGLANG_PROD_FRONTEND_X_API_KEY"
    assert shown["Authorization"] == "Bearer $SGLANG_TOKEN"
    applied = vllm.credentials().apply("http://vllm.example:8001/v1/rl/workers")
    assert "key=gateway-key-246813579" in applied.url
    assert "key=${GW_KEY}" in applied.recorded_url
    said = REDACTOR.redact("team-rl-42 header-file-key-987 gateway-key-246813579")
    assert said == "$TENANT $SGLANG_PROD_FRONTEND_X_API_KEY $GW_KEY"


def test_two_tables_with_the_same_header_keep_apart_references(in_tmp: Path) -> None:
    (in_tmp / "b.txt").write_text("X-Api-Key: the-other-key-13579\n")
    text = (
        '[a]\nfrontend = "http://a:8000"\nbackend = "vllm"\nheaders = ["@headers.txt"]\n'
        '[b]\nfrontend = "http://b:8000"\nbackend = "vllm"\nheaders = ["@b.txt"]\n'
    )
    first, second = load_targets(written(in_tmp, text))
    one = first.credentials().apply("http://a:8000/").headers[0]
    other = second.credentials().apply("http://b:8000/").headers[0]
    assert (one.shown, other.shown) == ("$A_FRONTEND_X_API_KEY", "$B_FRONTEND_X_API_KEY")
    assert REDACTOR.resolve(one.shown) == "header-file-key-987"
    assert REDACTOR.resolve(other.shown) == "the-other-key-13579"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "expected one table per deployment ([NAME] and its keys below it), observed none"),
        ('frontend = "http://h:8000"\n', "observed the key 'frontend' outside any table"),
        ("[t\n", "not TOML: "),
        ('["a b"]\nfrontend = "http://h"\n', "fleets.toml [a b]: expected a table name"),
        ("[t]\n", "fleets.toml [t]: expected the keys of a deployment"),
        ('[t]\nfront_end = "x"\n', "front_end: not a key of a deployment (did you mean frontend?)"),
        ('[t]\nfrontend = "http://h"\n[t.x]\nbackend = "vllm"\n', "is a table inside [t]"),
        ('[t]\nfrontend = "http://h"\nworker_urls = "http://w"\n', "expected a list of strings"),
        ('[t]\nfrontend = "http://h"\nworkers = ["7"]\n', "expected a list of integers"),
        ('[t]\nfrontend = "http://h"\nallow_mutations = "yes"\n', "expected true or false"),
        ("[t]\nfrontend = 8000\n", "[t] frontend: expected a string, observed an integer"),
        ('[t]\nfrontend = "http://h"\nbackend = "vlm"\n', "backend: expected one of vllm"),
        ('[t]\nbackend = "vllm"\n', "[t] backend describes an external deployment: give "),
        ('[t]\nfrontend = "http://h"\n', "[t] frontend needs backend"),
    ],
)
def test_a_wrong_file_is_refused_naming_the_file_table_and_key(
    in_tmp: Path, text: str, says: str
) -> None:
    assert says in refused(text, in_tmp)


def test_a_file_that_cannot_be_read_is_named(in_tmp: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"--targets missing.toml: cannot be read"):
        RunConfig(targets=str(in_tmp / "missing.toml")).validate()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--backend", "vllm"], "--backend describes the deployment at --frontend"),
        (["--token-env", "SGLANG_TOKEN"], "takes token_env in its own table"),
        (["--allow-mutations", "--all-workers"], "takes allow_mutations in its own table"),
        (["--update-model-path", "/a", "--update-model-path", "/b"], "update_model_paths"),
    ],
)
def test_a_deployment_flag_beside_a_targets_file_is_refused_naming_its_key(
    in_tmp: Path, argv: list[str], says: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(says)):
        flags("--targets", written(in_tmp, TWO), *argv).validate()


def test_the_flags_that_choose_workers_still_apply_to_what_the_run_starts(in_tmp: Path) -> None:
    beside_a_fake = flags(
        "--targets", written(in_tmp, TWO), "--fake", "vllm", "--allow-mutations", "--all-workers"
    ).validate()
    assert [d.target_id for d in beside_a_fake.deployments()] == ["vllm-prod", "sglang-prod"]
    assert beside_a_fake.flag_deployment().all_workers
    beside_flags = flags(
        "--targets", written(in_tmp, TWO), "--frontend", "http://x:8000", "--backend", "vllm"
    ).validate()
    assert [d.target_id for d in beside_flags.deployments()] == [
        "external-vllm",
        "vllm-prod",
        "sglang-prod",
    ]
