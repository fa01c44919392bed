"""A real ingress in the loop: Debian's nginx on loopback in front of a fake deployment's
frontend and RL listener (TLS with a CA and certificates made here, client certificates asked
for, gzip on JSON, its default proxy buffering on event streams, keep-alive), reached the way a
user reaches theirs: by URL with `--ca-bundle` and `--client-cert`.

The matrix through nginx equals the direct matrix cell for cell (a mutating run, the refresh
and pause rows included); a run through an HTTP proxy (CONNECT to the ingress, absolute form to
the workers' system servers) equals it too; and each wrong CA, missing, refused or expired
client certificate, expired server certificate or dead proxy ends the run with its own one
message naming what to give, never a `fail`."""

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


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Material:
    return tls_material.make(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def fleet() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm", workers=2) as deployment:
        yield deployment


@pytest.fixture
def fronted(nginx: str, fleet: FakeDeployment, pki: Material, tmp_path: Path) -> Iterator[Ingress]:
    """nginx in front of the fleet's frontend and RL listener, asking for client certificates."""
    upstreams = {"frontend": fleet.frontend_url, "rl": fleet.rl_url}
    asking = pki.client_ca.cert
    with ingress(nginx, tmp_path / "nginx", upstreams, pki.server, client_ca=asking) as made:
        yield made


def by_url(frontend: str, rl: str) -> list[str]:
    return ["--frontend", frontend, "--rl-url", rl, "--backend", "vllm"]


def certificates(pki: Material) -> list[str]:
    return [
        *("--ca-bundle", str(pki.ca.cert)),
        *("--client-cert", str(pki.client.cert), "--client-key", str(pki.client.key)),
    ]


def outcomes(matrix: dict[str, Any]) -> dict[str, str]:
    return {capability: cell["outcome"] for capability, cell in cells(matrix).items()}


def different(direct: dict[str, Any], through: dict[str, Any]) -> dict[str, tuple[str, str]]:
    first, second = cells(direct), cells(through)
    return {
        capability: (f"{first[capability]['outcome']} directly", cell["reason"][:300])
        for capability, cell in second.items()
        if cell["outcome"] != first[capability]["outcome"]
    }


def test_the_matrix_through_nginx_equals_the_direct_matrix_cell_for_cell(
    fleet: FakeDeployment, fronted: Ingress, pki: Material, tmp_path: Path
) -> None:
    direct = run(tmp_path / "direct", *by_url(fleet.frontend_url, fleet.rl_url), *MUTATING)
    through = run(
        tmp_path / "through",
        *by_url(fronted.url("frontend"), fronted.url("rl")),
        *certificates(pki),
        *MUTATING,
    )
    assert not different(direct, through), (different(direct, through), through["stdout"])
    assert outcomes(through).get("refresh.pause_mode_effect") == "pass"
    assert through["returncode"] == direct["returncode"] == 0
    served = fronted.served()
    assert any(line.gzipped and line.path == "/v1/models" for line in served), served[:5]
    assert any(line.requests_on_connection > 1 for line in served)  # keep-alive
    assert sum(line.path == "/v1/completions" for line in served) > 20
    (target,) = through["targets"]
    assert f"https certificates verified against the CAs in {pki.ca.cert}" in target["notes"][0]


def test_a_run_through_a_proxy_equals_the_direct_one(
    fleet: FakeDeployment, fronted: Ingress, pki: Material, tmp_path: Path
) -> None:
    """HTTPS_PROXY tunnels to the ingress, HTTP_PROXY forwards to the workers' system servers."""
    direct = run(tmp_path / "direct", *by_url(fleet.frontend_url, fleet.rl_url), *MUTATING)
    with ForwardProxy().running() as proxy:
        variables = {"HTTPS_PROXY": proxy.url, "HTTP_PROXY": proxy.url}
        with pytest.MonkeyPatch.context() as patch:
            for name, value in variables.items():
                patch.setenv(name, value)
            through = run(
                tmp_path / "proxied",
                *by_url(fronted.url("frontend"), fronted.url("rl")),
                *certificates(pki),
                *MUTATING,
            )
    assert not different(direct, through), different(direct, through)
    tunnels = {asked.target for asked in proxy.asked if asked.method == "CONNECT"}
    ingress_ports = {route.url.removeprefix("https://") for route in fronted.routes.values()}
    assert tunnels == ingress_ports
    forwarded = {asked.target.split("/")[2] for asked in proxy.asked if asked.method != "CONNECT"}
    workers = {worker["system_url"].split("/")[2] for worker in fleet.workers}
    assert workers <= forwarded, (workers, forwarded)


def wrong(pki: Material, name: str) -> tuple[list[str], dict[str, str], str]:
    """The flags and variables of one wrong input, and the one message it ends in."""
    cert = certificates(pki)[2:]
    ca = ["--ca-bundle", str(pki.ca.cert)]
    stranger = pki.stranger_client
    strangers = ["--client-cert", str(stranger.cert), "--client-key", str(stranger.key)]
    cases: dict[str, tuple[list[str], dict[str, str], str]] = {
        "no CA": (
            cert,
            {},
            "is not signed by a CA this run trusts (unable to get local issuer certificate; "
            "trusted: certifi's public CAs): give the CA that signed it with --ca-bundle FILE",
        ),
        "another CA": (
            ["--ca-bundle", str(pki.stranger_ca.cert), *cert],
            {},
            f"is not signed by a CA this run trusts (unable to get local issuer certificate; "
            f"trusted: the CAs in {pki.stranger_ca.cert} (from --ca-bundle))",
        ),
        "no client certificate": (
            ca,
            {},
            "the server asks for a client certificate and this run showed none (HTTP 400 'No "
            "required SSL certificate was sent'): give --client-cert FILE",
        ),
        "a stranger's client certificate": (
            [*ca, *strangers],
            {},
            f"the server refused the client certificate {pki.stranger_client.cert} (HTTP 400 "
            "'The SSL certificate error'): it is not signed by a CA the server trusts",
        ),
        "a dead proxy": (
            [*ca, *cert],
            {"HTTPS_PROXY": f"http://127.0.0.1:{closed_port()}"},
            "(ProxyError): the proxy http://127.0.0.1:",
        ),
    }
    return cases[name]


@pytest.mark.parametrize(
    "case",
    [
        "no CA",
        "another CA",
        "no client certificate",
        "a stranger's client certificate",
        "a dead proxy",
    ],
)
def test_each_wrong_input_ends_in_its_one_message(
    fronted: Ingress, pki: Material, tmp_path: Path, case: str
) -> None:
    flags, variables, message = wrong(pki, case)
    with pytest.MonkeyPatch.context() as patch:
        for name in CA_VARIABLES:
            patch.delenv(name, raising=False)
        for name, value in variables.items():
            patch.setenv(name, value)
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
