"""A real ingress in the loop: Debian's nginx on loopback in front of a fake deployment's
frontend and RL listener (TLS with a CA and certificates made here, client certificates asked
for, bearer authentication, gzip on JSON, its default proxy buffering on event streams,
keep-alive), reached the way a user reaches theirs: by URL with `--ca-bundle`, `--client-cert`
and `--token-env`.

The matrix through nginx equals the direct matrix cell for cell (a mutating run, the refresh
and pause rows included); a run through an authenticating HTTP proxy (CONNECT to the ingress,
absolute form to the workers' system servers) equals it too and writes none of its secrets; and
each wrong CA, missing, refused or expired client certificate, expired server certificate,
missing, wrong or expired token, or dead proxy ends the run in its own one message naming what
to give, never a `fail`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tls_material
from forward_proxy import ForwardProxy, closed_port
from tls_material import Material

from fake_backends import FakeDeployment

from .nginx_ingress import Ingress, ingress
from .test_launch_mode_equivalence import CHECKPOINTS, cells, run

pytestmark = pytest.mark.slow
CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")
MUTATING = ("--allow-mutations", "--all-workers", *CHECKPOINTS)
TOKEN, EXPIRED = "ingress-token-4f1c9b27", "ingress-token-expired-77aa"
TOKEN_VARIABLE = "INGRESS_TOKEN"
PROXY_PASSWORD = "proxy-pass-5e0d13"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Material:
    return tls_material.make(tmp_path_factory.mktemp("pki"))


SERVED_PATH = "/models/policy"
"""The fleet's checkpoint, served under its path as vLLM serves `--model` without
`--served-model-name`: the mutating run puts each worker back from discovery's `model`."""


@pytest.fixture
def fleet() -> Iterator[FakeDeployment]:
    with FakeDeployment(
        "vllm", workers=2, model=SERVED_PATH, initial_model_path=SERVED_PATH
    ) as deployment:
        yield deployment


@pytest.fixture
def fronted(nginx: str, fleet: FakeDeployment, pki: Material, tmp_path: Path) -> Iterator[Ingress]:
    """nginx in front of the fleet's frontend and RL listener, asking for client certificates
    and a bearer token."""
    upstreams = {"frontend": fleet.frontend_url, "rl": fleet.rl_url}
    with ingress(
        nginx,
        tmp_path / "nginx",
        upstreams,
        pki.server,
        client_ca=pki.client_ca.cert,
        token=TOKEN,
        expired_token=EXPIRED,
    ) as made:
        yield made


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The runs' environment: the token in its variable, no CA variable of the machine's."""
    for name in CA_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(TOKEN_VARIABLE, TOKEN)
    return monkeypatch


def by_url(frontend: str, rl: str) -> list[str]:
    return ["--frontend", frontend, "--rl-url", rl, "--backend", "vllm"]


def credentials(pki: Material) -> list[str]:
    """What the ingress asks for: its CA, a client certificate, a bearer token."""
    return [
        *("--ca-bundle", str(pki.ca.cert)),
        *("--client-cert", str(pki.client.cert), "--client-key", str(pki.client.key)),
        *("--token-env", TOKEN_VARIABLE),
    ]


def different(direct: dict[str, Any], through: dict[str, Any]) -> dict[str, tuple[str, str]]:
    first, second = cells(direct), cells(through)
    return {
        capability: (f"{first[capability]['outcome']} directly", cell["reason"][:300])
        for capability, cell in second.items()
        if cell["outcome"] != first[capability]["outcome"]
    }


def test_the_matrix_through_nginx_equals_the_direct_matrix_cell_for_cell(
    fleet: FakeDeployment,
    fronted: Ingress,
    pki: Material,
    environment: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    direct = run(tmp_path / "direct", *by_url(fleet.frontend_url, fleet.rl_url), *MUTATING)
    through = run(
        tmp_path / "through",
        *by_url(fronted.url("frontend"), fronted.url("rl")),
        *credentials(pki),
        *MUTATING,
    )
    assert not different(direct, through), (different(direct, through), through["stdout"])
    assert cells(through)["refresh.pause_mode_effect"]["outcome"] == "pass"
    assert through["returncode"] == direct["returncode"] == 0
    served = fronted.served()
    assert not [line for line in served if line.status == 401]
    assert any(line.gzipped and line.path == "/v1/models" for line in served), served[:5]
    assert any(line.requests_on_connection > 1 for line in served)  # keep-alive
    assert sum(line.path == "/v1/completions" for line in served) > 20
    (target,) = through["targets"]
    assert f"https certificates verified against the CAs in {pki.ca.cert}" in target["notes"][0]


def test_a_run_through_an_authenticating_proxy_equals_the_direct_one(
    fleet: FakeDeployment,
    fronted: Ingress,
    pki: Material,
    environment: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """HTTPS_PROXY tunnels to the ingress, HTTP_PROXY forwards to the workers' system servers;
    neither the proxy's password nor the token is written anywhere."""
    direct = run(tmp_path / "direct", *by_url(fleet.frontend_url, fleet.rl_url), *MUTATING)
    with ForwardProxy(credentials=("ci", PROXY_PASSWORD)).running() as proxy:
        with_password = proxy.url.replace("http://", f"http://ci:{PROXY_PASSWORD}@")
        environment.setenv("HTTPS_PROXY", with_password)
        environment.setenv("HTTP_PROXY", with_password)
        through = run(
            tmp_path / "proxied",
            *by_url(fronted.url("frontend"), fronted.url("rl")),
            *credentials(pki),
            *MUTATING,
        )
    assert not different(direct, through), different(direct, through)
    tunnels = {asked.target for asked in proxy.asked if asked.method == "CONNECT"}
    ingress_ports = {route.url.removeprefix("https://") for route in fronted.routes.values()}
    assert tunnels == ingress_ports
    forwarded = {asked.target.split("/")[2] for asked in proxy.asked if asked.method != "CONNECT"}
    workers = {worker["system_url"].split("/")[2] for worker in fleet.workers}
    assert workers <= forwarded, (workers, forwarded)
    written = [path for path in (tmp_path / "proxied").rglob("*") if path.is_file()]
    assert written
    for path in written:
        text = path.read_bytes()
        assert PROXY_PASSWORD.encode() not in text and TOKEN.encode() not in text, path


def wrong(pki: Material, name: str) -> tuple[list[str], dict[str, str], str]:
    """The flags and variables of one wrong input, and the one message it ends in."""
    ca = ["--ca-bundle", str(pki.ca.cert)]
    cert = ["--client-cert", str(pki.client.cert), "--client-key", str(pki.client.key)]
    token = ["--token-env", TOKEN_VARIABLE]
    stranger = pki.stranger_client
    strangers = ["--client-cert", str(stranger.cert), "--client-key", str(stranger.key)]
    cases: dict[str, tuple[list[str], dict[str, str], str]] = {
        "no CA": (
            [*cert, *token],
            {},
            "is not signed by a CA this run trusts (unable to get local issuer certificate; "
            "trusted: certifi's public CAs): give the CA that signed it with --ca-bundle FILE",
        ),
        "another CA": (
            ["--ca-bundle", str(pki.stranger_ca.cert), *cert, *token],
            {},
            f"is not signed by a CA this run trusts (unable to get local issuer certificate; "
            f"trusted: the CAs in {pki.stranger_ca.cert} (from --ca-bundle))",
        ),
        "no client certificate": (
            [*ca, *token],
            {},
            "the server asks for a client certificate and this run showed none (HTTP 400 'No "
            "required SSL certificate was sent'): give --client-cert FILE",
        ),
        "a stranger's client certificate": (
            [*ca, *strangers, *token],
            {},
            f"the server refused the client certificate {stranger.cert} (HTTP 400 'The SSL "
            "certificate error'): it is not signed by a CA the server trusts",
        ),
        "no token": (
            [*ca, *cert],
            {},
            "refuses requests without credentials (GET /v1/models answered HTTP 401 "
            "Unauthorized): give them with",
        ),
        "a wrong token": (
            [*ca, *cert, *token],
            {TOKEN_VARIABLE: "not-the-token-0000"},
            f"refused the credentials given (--token-env {TOKEN_VARIABLE}; GET /v1/models "
            "answered HTTP 401 Unauthorized): give valid ones",
        ),
        "an expired token": (
            [*ca, *cert, *token],
            {TOKEN_VARIABLE: EXPIRED},
            f"refused the credentials given (--token-env {TOKEN_VARIABLE}; GET /v1/models "
            "answered HTTP 401 Unauthorized, saying invalid_token: The access token expired)",
        ),
        "a dead proxy": (
            [*ca, *cert, *token],
            {"HTTPS_PROXY": f"http://127.0.0.1:{closed_port()}"},
            "(ProxyError): the proxy http://127.0.0.1:",
        ),
    }
    return cases[name]


WRONG = (
    "no CA",
    "another CA",
    "no client certificate",
    "a stranger's client certificate",
    "no token",
    "a wrong token",
    "an expired token",
    "a dead proxy",
)


@pytest.mark.parametrize("case", WRONG)
def test_each_wrong_input_ends_in_its_one_message(
    fronted: Ingress,
    pki: Material,
    environment: pytest.MonkeyPatch,
    tmp_path: Path,
    case: str,
) -> None:
    flags, variables, message = wrong(pki, case)
    for name, value in variables.items():
        environment.setenv(name, value)
    matrix = run(
        tmp_path,
        *by_url(fronted.url("frontend"), fronted.url("rl")),
        *flags,
        "--capability",
        "tokens.token_input",
    )
    (cell,) = cells(matrix).values()
    (target,) = matrix["targets"]
    assert cell["outcome"] == "error" and message in cell["reason"], cell["reason"]
    assert message in target["unreached"] and matrix["returncode"] == 3
    assert TOKEN not in str(matrix) and EXPIRED not in str(matrix)


def test_an_expired_certificate_is_named_on_either_side(
    nginx: str, fleet: FakeDeployment, pki: Material, tmp_path: Path
) -> None:
    upstreams = {"frontend": fleet.frontend_url, "rl": fleet.rl_url}
    with ingress(nginx, tmp_path / "nginx", upstreams, pki.expired_server) as expired:
        matrix = run(
            tmp_path / "server",
            *by_url(expired.url("frontend"), expired.url("rl")),
            "--ca-bundle",
            str(pki.ca.cert),
            "--capability",
            "tokens.token_input",
        )
    (cell,) = cells(matrix).values()
    assert "TLS: the certificate of https://127.0.0.1:" in cell["reason"]
    assert "has expired (certificate has expired): it must be renewed" in cell["reason"]
    client = ["--client-cert", str(pki.expired_client.cert)]
    client += ["--client-key", str(pki.expired_client.key)]
    command = [sys.executable, "-m", "rl_conformance", "run", "-q", "--report-dir"]
    command += [str(tmp_path / "client"), *by_url("https://127.0.0.1:9", "https://127.0.0.1:8")]
    done = subprocess.run([*command, *client], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"--client-cert {pki.expired_client.cert}: the certificate expired on " in done.stderr
