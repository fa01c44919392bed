"""A user's mistake is never the deployment's failure: the functions that recognise wrong inputs
(`inputs`, `RunConfig.validate`, path flags resolved when parsed) name the input and the fix, and
leave what a Dynamo deployment itself answers to the tests."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from rl_conformance.cli import build_parser
from rl_conformance.client.breaker import CircuitBreaker, PlaneRefused
from rl_conformance.errors import ConfigurationError
from rl_conformance.launchers import inputs
from rl_conformance.model.config import RunConfig, resolve_path, same_url
from rl_conformance.model.options import OPTIONS
from rl_conformance.plugin.recording import assertion_site
from rl_conformance.wire.exchange import Exchange, WireRequest, shorten

HTML_404 = (
    b"<!DOCTYPE HTML>\n<html lang='en'><head><title>Error response</title></head>"
    b"<body><h1>Error response</h1><p>Error code: 404</p><p>Message: File not found.</p>"
    b"</body></html>\n"
)
DYNAMO_404 = b'{"message":"Route not found: GET /v1/rl/workers","type":"Not Found","code":404}'
MODELS = {"object": "list", "data": [{"id": "toy", "object": "model", "owned_by": "nvidia"}]}
VLLM_ROUTES = ["flush_cache", "get_weight_version", "pause_generation", "resume_generation"]


def answer(
    path: str, status: int, body: Any, content_type: str = "application/json", **headers: str
) -> Exchange:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Exchange(
        WireRequest("GET", f"http://127.0.0.1:8000{path}", {}),
        status=status,
        headers={"content-type": content_type, **headers},
        body=raw,
    )


def discovery(*workers: dict[str, Any]) -> dict[str, Any]:
    return {"protocol_version": 1, "namespace": "dynamo", "workers": list(workers)}


def worker(routes: list[str]) -> dict[str, Any]:
    return {
        "namespace": "dynamo",
        "component": "backend",
        "endpoint": "rl",
        "instance_id": 7,
        "routes": routes,
    }


# -- the frontend ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exchange", "said"),
    [
        (answer("/v1/models", 404, HTML_404, "text/html"), "HTTP 404 (an HTML page: 'Error"),
        (
            answer("/v1/models", 200, b"<html><body>a login page</body></html>", "text/html"),
            "an HTML page",
        ),
        (answer("/v1/models", 405, b""), "HTTP 405 (an empty body): it serves no model listing"),
        (
            answer("/v1/models", 307, b"", location="https://sso/login"),
            "a redirect to https://sso/login",
        ),
        (answer("/v1/models", 200, b"{not json"), "a body that is not JSON"),
        (answer("/v1/models", 200, {"models": ["toy"]}), "not a model listing (no `data` list)"),
    ],
)
def test_a_server_that_is_not_a_dynamo_frontend_is_named(exchange: Exchange, said: str) -> None:
    why = inputs.frontend_problem(exchange)
    assert why is not None and said in why, why
    assert why.startswith("GET /v1/models answered HTTP")


@pytest.mark.parametrize(
    "exchange",
    [
        answer("/v1/models", 200, MODELS),
        answer("/v1/models", 200, {"object": "list", "data": []}),
        answer("/v1/models", 503, b"<html>502 Bad Gateway</html>", "text/html"),  # down, not wrong
        answer("/v1/models", 401, {"error": "unauthorized"}),
    ],
)
def test_a_dynamo_frontend_or_a_broken_one_is_left_to_the_tests(exchange: Exchange) -> None:
    assert inputs.frontend_problem(exchange) is None


# -- the RL listener ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exchange", "said"),
    [
        (answer("/v1/rl/workers", 404, DYNAMO_404), 'HTTP 404 (\'{"message":"Route not found'),
        (answer("/v1/rl/workers", 404, HTML_404, "text/html"), "an HTML page"),
        (answer("/v1/rl/workers", 200, {"hello": "world"}), "not a discovery body"),
        (
            answer(
                "/v1/rl/workers",
                200,
                {"protocol_version": 1, "workers": [{"id": "w", "url": "http://w"}], "total": 1},
            ),
            "the SGLang Model Gateway's worker list",
        ),
    ],
)
def test_a_server_that_is_not_dynamos_listener_is_named(exchange: Exchange, said: str) -> None:
    why = inputs.listener_problem(exchange)
    assert why is not None and said in why, why


@pytest.mark.parametrize(
    "body",
    [
        discovery(worker(VLLM_ROUTES)),
        discovery(),
        {"protocol_version": 2, "namespace": "dynamo", "workers": []},  # Dynamo's, but broken
        discovery({"namespace": "dynamo", "component": "backend", "endpoint": "rl"}),
    ],
)
def test_dynamos_listener_even_a_broken_one_is_left_to_the_tests(body: Any) -> None:
    assert inputs.listener_problem(answer("/v1/rl/workers", 200, body)) is None


def test_a_redirecting_listener_is_named() -> None:
    exchange = answer("/v1/rl/workers", 302, b"", location="http://elsewhere/")
    assert "a redirect to http://elsewhere/" in (inputs.listener_problem(exchange) or "")


# -- the model and the backend --------------------------------------------------------------------


def test_a_model_not_served_names_the_served_ones() -> None:
    url = "http://f/v1/models"
    assert inputs.model_problem("toy", ["toy"], url) is None
    assert inputs.model_problem(None, ["toy", "other"], url) is None  # chosen later
    one = inputs.model_problem("no-such-model", ["toy"], url)
    assert one == (
        "--model no-such-model is not served (give --model toy): GET http://f/v1/models lists toy"
    )
    several = inputs.model_problem("x", ["a", "b"], url) or ""
    assert "lists a, b" in several and "give --model with one of them" in several
    none = inputs.model_problem("x", [], url) or ""
    assert none.startswith("--model x is not served") and "lists no model" in none
    assert inputs.served_models(MODELS) == ["toy"]
    assert inputs.served_models({"data": [{"id": 1}, "junk", {}]}) == ["1"]


def test_a_backend_contradicted_by_the_advertised_routes_is_named() -> None:
    vllm = discovery(worker(VLLM_ROUTES))
    url = "http://l/v1/rl/workers"
    why = inputs.backend_problem("sglang", vllm, url) or ""
    assert why.startswith("--backend sglang is contradicted by discovery (give --backend vllm)")
    assert "resume_generation" in why
    assert "give --backend vllm" in (inputs.backend_problem("trtllm", vllm, url) or "")
    sidecar = discovery(worker(["control/is_paused", "control/resume_generation"]))
    assert "give --backend vllm" in (inputs.backend_problem("sglang", sidecar, url) or "")
    sglang = discovery(worker(["continue_generation", "pause_generation"]))
    assert "give --backend sglang" in (inputs.backend_problem("vllm", sglang, url) or "")
    for backend in ("vllm", "sglang", "trtllm"):
        assert inputs.backend_problem(backend, discovery(), url) is None  # nothing to go by
    assert inputs.backend_problem("vllm", vllm, url) is None
    assert inputs.backend_problem("vllm", {"workers": "junk"}, url) is None


def test_an_html_body_is_described_by_its_text_cut_between_words() -> None:
    described = inputs.describe_body(answer("/", 404, HTML_404 * 5, "text/html"))
    assert described.startswith("an HTML page: 'Error response Error response Error code: 404")
    assert "<" not in described and described.endswith(" ...'")


# -- before anything starts -----------------------------------------------------------------------


def test_unknown_fault_names_are_refused_with_the_closest_names() -> None:
    with pytest.raises(ConfigurationError) as raised:
        inputs.check_config(RunConfig(fake=("vllm",), fault=("routes_unsortd",)).validate())
    message = str(raised.value)
    assert message.startswith("--fault routes_unsortd: our fakes have no fault of that name")
    assert "did you mean routes_unsorted" in message and "--list-faults" in message
    with pytest.raises(ConfigurationError, match="--engine-fault nope: our toy engine has no"):
        inputs.check_config(RunConfig(launch="dynamo-fake-vllm", engine_fault=("nope",)))
    inputs.check_config(RunConfig(fake=("vllm",), fault=("routes_unsorted",)))
    inputs.check_config(RunConfig(fault=("routes_unsorted",)))  # the default fakes include vllm


def test_a_fault_no_fake_of_the_run_can_have_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="add --fake vllm"):
        inputs.check_config(RunConfig(fake=("trtllm",), fault=("protocol_version_2",)))
    assert inputs.inapplicable_fault("x", {"vllm"}, ("vllm-sidecar",)) is None  # its backend
    assert "tests none" in (inputs.inapplicable_fault("x", {"vllm"}, ()) or "")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"frontend": "http://h:8000", "rl_url": "HTTP://h:8000/", "backend": "vllm"},
            "--rl-url HTTP://h:8000/ is the --frontend URL",
        ),
        (
            {"frontend": "http://h", "rl_url": "http://h:80", "backend": "vllm"},
            "is the --frontend URL",
        ),
        ({"update_model_path": ("/ckpt/a",)}, "observed one (/ckpt/a): give a second"),
        ({"frontend": "http://h", "backend": "vllm", "fault": ("x",)}, "this run tests none"),
        ({"launch": "dynamo-mocker", "dynamo_python": ("/no/such/python",)}, "--dynamo-python"),
        ({"reference_python": "/no/such/python"}, "--reference-python /no/such/python: no such"),
        (
            {"update_model_path": ("/a", "/b"), "reference_checkpoint": ("/no/such/ckpt",)},
            "--reference-checkpoint /no/such/ckpt: no such file or directory",
        ),
        ({"ca_bundle": "/no/ca.pem"}, "--ca-bundle /no/ca.pem: no such file or directory"),
        ({"client_key": "/k.pem"}, "--client-key needs --client-cert"),
        ({"insecure": True, "ca_bundle": "/ca.pem"}, "--ca-bundle would be ignored"),
    ],
)
def test_inputs_wrong_whatever_the_deployment_are_configuration_errors(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        RunConfig(**options).validate()
    assert message in str(raised.value)


def test_two_update_paths_and_distinct_urls_are_fine() -> None:
    RunConfig(update_model_path=("/a", "/b")).validate()
    RunConfig(frontend="http://h:8000", rl_url="http://h:8001", backend="vllm").validate()
    assert same_url("http://H:80/", "http://h") and not same_url("http://h:8000", "http://h:8001")
    assert not same_url("http://h/a", "http://h/b")


def test_path_flags_are_resolved_against_the_working_directory_when_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    flags = {option.flag for option in OPTIONS if option.path}
    assert flags == {
        "--targets",
        "--dynamo-python",
        "--reference-python",
        "--update-model-path",
        "--reference-checkpoint",
        "--weight-transfer",
        "--docker-config",
        "--report-dir",
        "--request-trace",
        "--record-meta",
        "--token-file",
        "--rl-token-file",
        "--admin-token-file",
        "--ca-bundle",
        "--client-cert",
        "--client-key",
    }
    args = build_parser().parse_args(
        [
            "run",
            "--dynamo-python",
            ".venv-dynamo/bin/python",
            "--reference-python",
            "~/py",
            "--update-model-path",
            "ckpt/a",
            "--update-model-path",
            "/abs/b",
            "--reference-checkpoint",
            "../copy",
            "--weight-transfer",
            "t.json",
            "--docker-config",
            "d.json",
        ]
    )
    config = RunConfig.from_options(args)
    here = str(tmp_path)
    assert config.dynamo_python == (os.path.join(here, ".venv-dynamo/bin/python"),)
    assert config.reference_python == os.path.expanduser("~/py")
    assert config.update_model_path == (os.path.join(here, "ckpt/a"), "/abs/b")
    assert config.reference_checkpoint == (os.path.dirname(here) + "/copy",)
    assert config.weight_transfer == (os.path.join(here, "t.json"),)
    assert config.docker_config == os.path.join(here, "d.json")
    assert config.report_dir == os.path.join(here, "conformance-report")  # the default too
    assert resolve_path("s3://bucket/ckpt") == "s3://bucket/ckpt" and resolve_path(None) is None


def test_install_dynamo_prints_an_absolute_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rl_conformance.cli import install_dynamo

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(install_dynamo, "install", lambda venv, version: venv / "bin" / "python")
    assert install_dynamo.handle(build_parser().parse_args(["install-dynamo"])) == 0
    printed = capsys.readouterr().out
    assert f"--dynamo-python {tmp_path / '.venv-dynamo' / 'bin' / 'python'}" in printed


# -- how a wrong input and a failed assert are reported -------------------------------------------


def test_a_refused_plane_raises_its_reason_verbatim_with_the_evidence() -> None:
    breaker = CircuitBreaker()
    breaker.refuse("http://l:8001/v1/rl/workers", "--rl-url http://l:8001 is not ...", ("e",))
    with pytest.raises(PlaneRefused) as raised:
        breaker.check("http://l:8001/anything")
    assert str(raised.value) == "--rl-url http://l:8001 is not ..."
    assert raised.value.evidence == ("e",)
    breaker.check("http://f:8000/v1/models")  # another plane is not refused


def test_a_failed_assert_is_located_with_its_statement() -> None:
    def suite_test(model: str | None) -> None:
        assert model is not None

    with pytest.raises(AssertionError) as raised:
        suite_test(None)
    where, statement = assertion_site(raised.value)
    assert where == f"{Path(__file__).name}:{suite_test.__code__.co_firstlineno + 1}"
    assert statement == "assert model is not None"


def test_console_lines_are_cut_between_words() -> None:
    text = "GET /v1/models answered HTTP 404 and it serves no model listing " * 8
    cut = shorten(text, 100)
    assert len(cut) <= 100 and cut.endswith(" ...")
    assert text.startswith(cut.removesuffix(" ...") + " ")  # whole words only
    assert shorten("short  and\nsweet", 100) == "short and sweet"
    assert shorten("x" * 300, 100) == "x" * 300  # one word longer than the line: kept whole


def test_an_adapter_module_in_the_working_directory_is_importable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rl_conformance.certify.loading import load_factory

    package = tmp_path / "wrong_inputs_examples"
    package.mkdir()
    (package / "shim.py").write_text("def make(ctx):\n    return None\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "wrong_inputs_examples", raising=False)
    monkeypatch.delitem(sys.modules, "wrong_inputs_examples.shim", raising=False)
    factory = load_factory("wrong_inputs_examples.shim:make")
    assert factory.__name__ == "make"  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="cannot import module 'no_such_module_here'"):
        load_factory("no_such_module_here:make")
