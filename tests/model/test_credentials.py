"""Credentials per plane, from the one table of options: headers, bearer tokens from a file or a
variable, the listener inheriting the frontend's, the workers never; each request routed to its
plane's; every mistake refused naming the flag, never the value."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from rl_conformance.errors import ConfigurationError
from rl_conformance.model.config import RunConfig
from rl_conformance.model.credentials import FRONTEND, LISTENER, WORKERS, Credentials
from rl_conformance.model.options import add_arguments
from rl_conformance.redaction import REDACTOR

FRONT = "http://gw.example:8000"
RL = "http://gw.example:8001"
TOKEN = "frontend-token-0123456789"
ADMIN = "admin-token-abcdefghij"


@pytest.fixture(autouse=True)
def forget_secrets() -> Iterator[None]:
    yield
    REDACTOR.forget()


def config(*argv: str) -> RunConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    base = ["--frontend", FRONT, "--rl-url", RL, "--backend", "vllm"]
    return RunConfig.from_options(parser.parse_args([*base, *argv])).validate()


def headers(credentials: Credentials, url: str) -> dict[str, str]:
    return {sent.name: sent.current() for sent in credentials.apply(url).headers}


def shown(credentials: Credentials, url: str) -> dict[str, str]:
    return {sent.name: sent.shown for sent in credentials.apply(url).headers}


def test_a_token_from_a_variable_is_a_bearer_header_shown_as_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DYNAMO_TOKEN", TOKEN)
    credentials = config("--token-env", "DYNAMO_TOKEN").credentials()
    assert headers(credentials, f"{FRONT}/v1/models") == {"Authorization": f"Bearer {TOKEN}"}
    assert shown(credentials, f"{FRONT}/v1/models") == {"Authorization": "Bearer $DYNAMO_TOKEN"}
    assert REDACTOR.redact(f"echo {TOKEN}") == "echo $DYNAMO_TOKEN"


def test_a_token_file_is_read_and_shown_as_its_cat(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    credentials = config("--token-file", str(path)).credentials()
    assert headers(credentials, f"{FRONT}/v1/completions") == {"Authorization": f"Bearer {TOKEN}"}
    assert shown(credentials, f"{FRONT}/v1/completions") == {
        "Authorization": f"Bearer $(cat {path})"
    }


def test_a_rotated_token_file_is_sent_from_the_next_request_and_redacted(tmp_path: Path) -> None:
    """A projected service-account token is swapped under its path (a new file renamed over
    it); a file caught empty mid-write keeps the token before it."""
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    credentials = config("--token-file", str(path)).credentials()
    url = f"{FRONT}/v1/completions"
    assert headers(credentials, url) == {"Authorization": f"Bearer {TOKEN}"}
    rotated = "rotated-token-9876543210"
    swap = tmp_path / "token.new"
    swap.write_text(rotated + "\n")
    swap.replace(path)
    assert headers(credentials, url) == {"Authorization": f"Bearer {rotated}"}
    assert shown(credentials, url) == {"Authorization": f"Bearer $(cat {path})"}
    assert REDACTOR.redact(f"sent {rotated}") == f"sent $(cat {path})"
    path.write_text("")
    assert headers(credentials, url) == {"Authorization": f"Bearer {rotated}"}


def test_the_listener_inherits_the_frontend_and_the_workers_never_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DYNAMO_TOKEN", TOKEN)
    admin = tmp_path / "admin"
    admin.write_text(ADMIN)
    credentials = config(
        "--token-env",
        "DYNAMO_TOKEN",
        "--header",
        "X-Tenant: research-team-a",
        "--admin-token-file",
        str(admin),
    ).credentials()
    listener = headers(credentials, f"{RL}/v1/rl/workers")
    assert listener == {"X-Tenant": "research-team-a", "Authorization": f"Bearer {TOKEN}"}
    worker = headers(credentials, "http://10.0.0.7:9090/engine/pause_generation")
    assert worker == {"Authorization": f"Bearer {ADMIN}"}
    assert TOKEN not in str(worker)


def test_the_listener_replaces_and_removes_what_it_inherits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DYNAMO_TOKEN", TOKEN)
    monkeypatch.setenv("RL_TOKEN", "listener-token-xyz")
    credentials = config(
        "--token-env",
        "DYNAMO_TOKEN",
        "--header",
        "X-Tenant: research-team-a",
        "--rl-token-env",
        "RL_TOKEN",
        "--rl-header",
        "X-Tenant:",
    ).credentials()
    assert headers(credentials, f"{RL}/v1/rl/workers") == {
        "Authorization": "Bearer listener-token-xyz"
    }
    assert headers(credentials, f"{FRONT}/v1/models")["Authorization"] == f"Bearer {TOKEN}"


def test_without_admin_credentials_a_worker_receives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DYNAMO_TOKEN", TOKEN)
    credentials = config("--token-env", "DYNAMO_TOKEN").credentials()
    assert headers(credentials, "http://10.0.0.7:9090/health") == {}
    assert credentials.route("http://10.0.0.7:9090/health")[0].key == WORKERS  # type: ignore[union-attr]


def test_the_longest_url_given_decides_the_plane(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DYNAMO_TOKEN", TOKEN)
    monkeypatch.setenv("ADMIN_TOKEN", ADMIN)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    given = RunConfig.from_options(
        parser.parse_args(
            [
                "--frontend",
                "https://gw.example/",
                "--rl-url",
                "https://gw.example/rl",
                "--worker-url",
                "https://gw.example/workers/0",
                "--backend",
                "sglang",
                "--token-env",
                "DYNAMO_TOKEN",
                "--admin-token-env",
                "ADMIN_TOKEN",
            ]
        )
    ).validate()
    credentials = given.credentials()
    route = credentials.route
    assert route("https://gw.example/v1/models")[0].key == FRONTEND  # type: ignore[union-attr]
    assert route("https://gw.example/rl/v1/rl/workers")[0].key == LISTENER  # type: ignore[union-attr]
    assert route("https://gw.example/rlx/v1")[0].key == FRONTEND  # type: ignore[union-attr]
    assert headers(credentials, "https://gw.example/workers/0/engine/x") == {
        "Authorization": f"Bearer {ADMIN}"
    }


def test_an_unnamed_path_on_the_listener_origin_receives_nothing() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    given = RunConfig.from_options(
        parser.parse_args(
            [
                "--frontend",
                FRONT,
                "--rl-url",
                "http://rl.example/listener",
                "--backend",
                "vllm",
                "--admin-header",
                "X-Admin: admin-secret-123",
            ]
        )
    ).validate()
    assert headers(given.credentials(), "http://rl.example/v1/models") == {}


def test_a_secret_query_parameter_is_sent_and_recorded_as_its_reference() -> None:
    credentials = config(
        "--secret-query-param", "key", "--rl-url", f"{RL}/?key=query-secret-987&v=2"
    ).credentials()
    applied = credentials.apply(f"{RL}/v1/rl/workers?x=1")
    assert applied.url == f"{RL}/v1/rl/workers?x=1&key=query-secret-987&v=2"
    assert applied.recorded_url == f"{RL}/v1/rl/workers?x=1&key=$RL_KEY&v=2"
    assert REDACTOR.redact("GET /?key=query-secret-987") == "GET /?key=$RL_KEY"
    assert credentials.base_url(f"{RL}/?key=query-secret-987") == f"{RL}/"


def test_headers_from_a_file_need_no_secret_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "headers"
    path.write_text("# the gateway's\nX-Api-Key: file-key-0123456789\n\nX-Org: rl\n")
    credentials = config("--header", f"@{path}").credentials()
    assert headers(credentials, f"{FRONT}/v1/models") == {
        "X-Api-Key": "file-key-0123456789",
        "X-Org": "rl",
    }
    assert shown(credentials, f"{FRONT}/v1/models")["X-Api-Key"] == "$FRONTEND_X_API_KEY"


SECRET = "typed-secret-value-42"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--header", SECRET], "--header: expected 'NAME: VALUE'"),
        (["--header", f"Bad Name: {SECRET}"], "with a header name of letters"),
        (["--header", f"Content-Type: {SECRET}"], "the client sets this header itself"),
        (["--header", "X-A:"], "--header X-A: expected a value after the colon"),
        (["--header", f"X-A: {SECRET}", "--header", f"x-a: {SECRET}"], "each header once"),
        (["--token-env", "NOT_SET_ANYWHERE_42"], "the variable is not set"),
        (["--token-env", "1BAD"], "expected the name of an environment variable"),
        (["--token-file", "/nonexistent/token"], "cannot be read (No such file"),
        (["--token-file", "/dev/null"], "expected a token, observed an empty one"),
        (
            ["--header", f"Authorization: Bearer {SECRET}", "--token-env", "PATH"],
            "expected one Authorization for the frontend, observed both",
        ),
        (
            ["--frontend", f"http://alice:{SECRET}@gw.example:8000"],
            "--frontend: expected a URL without credentials",
        ),
        (
            ["--worker-url", f"http://{SECRET}@10.0.0.7:9090"],
            "--admin-header 'Authorization: Basic ...'",
        ),
    ],
)
def test_a_mistake_is_refused_naming_the_flag_never_the_value(argv: list[str], says: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        config(*argv)
    assert says in str(refused.value)
    assert SECRET not in str(refused.value)


def test_admin_credentials_go_to_their_deployment_alone_beside_a_fake() -> None:
    """Credentials are per deployment: a run that also tests a fake sends it none."""
    from rl_conformance.launchers.run_plan import plan_run

    plan = plan_run(config("--admin-header", f"X-A: {SECRET}", "--fake", "vllm"))
    assert headers(plan.credentials_for("external-vllm"), "http://10.0.0.7:9090/x") == {
        "X-A": SECRET
    }
    assert headers(plan.credentials_for("fake-vllm"), "http://10.0.0.7:9090/x") == {}


def test_credentials_need_the_deployment_they_belong_to() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(ConfigurationError, match="--header gives credentials of the deployment"):
        RunConfig.from_options(parser.parse_args(["--header", "X-A: b"])).validate()


def test_a_token_with_a_space_is_refused_without_showing_it(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("two words-0123456789\n")
    with pytest.raises(ConfigurationError, match="without spaces or control") as refused:
        config("--token-file", str(path))
    assert "words" not in str(refused.value)


def test_the_pytest_options_rebuild_the_same_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DYNAMO_TOKEN", TOKEN)
    given = config("--token-env", "DYNAMO_TOKEN", "--rl-header", "X-B: c")
    arguments = given.pytest_arguments()
    at = arguments.index("--rl-frontend-token-env")
    assert arguments[at : at + 2] == ["--rl-frontend-token-env", "DYNAMO_TOKEN"]
    assert "--rl-header" in arguments and TOKEN not in arguments


def test_a_value_may_name_the_variable_that_holds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """`${VAR}` in a header's value or a secret query parameter's is read from the environment
    and recorded as itself, so a reproducer replays it; a variable not set is named."""
    monkeypatch.setenv("API_KEY", "api-key-from-env-2468")
    monkeypatch.setenv("GW_KEY", "gw-key-from-env-1357")
    credentials = config(
        "--header",
        "X-Api-Key: ${API_KEY}",
        "--rl-url",
        f"{RL}/?key=${{GW_KEY}}",
        "--secret-query-param",
        "key",
    ).credentials()
    assert headers(credentials, f"{FRONT}/v1/models") == {"X-Api-Key": "api-key-from-env-2468"}
    assert shown(credentials, f"{FRONT}/v1/models") == {"X-Api-Key": "${API_KEY}"}
    applied = credentials.apply(f"{RL}/v1/rl/workers")
    assert "key=gw-key-from-env-1357" in applied.url and "key=${GW_KEY}" in applied.recorded_url
    assert REDACTOR.redact("api-key-from-env-2468") == "$API_KEY"
    with pytest.raises(ConfigurationError, match="the variable NOT_SET_ANYWHERE_42 is not set"):
        config("--header", "X-A: ${NOT_SET_ANYWHERE_42}")
