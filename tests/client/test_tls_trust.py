"""https with a private CA and client certificates (`client.network`, `client.dial`), against
loopback TLS servers holding certificates made for the test: each wrong CA, expired or misnamed
certificate, missing or refused client certificate ends in its own message naming what to
give; `--insecure` accepts any certificate."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator

import pytest
import tls_material
from tls_material import Material, Pair

from rl_conformance.client.breaker import CircuitBreaker
from rl_conformance.client.http import Client
from rl_conformance.client.network import Network
from rl_conformance.errors import ConfigurationError

from .test_http11 import JSON_OK, answer_each, peer


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Material:
    return tls_material.make(tmp_path_factory.mktemp("pki"))


def serving(server: Pair, client_ca: Pair | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(server.cert, server.key)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=str(client_ca.cert))
    return context


def get(network: Network, tls: ssl.SSLContext, path: str = "/v1/models") -> tuple[int | None, str]:
    """One GET through a client of `network` to a server of `tls`: the status and the error."""
    breaker = CircuitBreaker(threshold=0)
    with (
        peer(answer_each(JSON_OK), tls=tls) as server,
        Client(deadline_s=5, breaker=breaker, network=network) as client,
    ):
        exchange = client.get(server.url + path)
    return exchange.status, exchange.error or ""


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """No CA variable of the machine's: each test says what it trusts."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    yield {}


def test_a_private_ca_is_trusted_from_the_flag_or_the_standard_variables(
    pki: Material, environ: dict[str, str]
) -> None:
    tls = serving(pki.server)
    assert get(Network.from_options(ca_bundle=str(pki.ca.cert), environ=environ), tls) == (200, "")
    for variable in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"):
        network = Network.from_options(environ={variable: str(pki.ca.cert)})
        assert get(network, tls) == (200, ""), variable


def test_a_certificate_no_trusted_ca_signed_names_the_flag_to_give(
    pki: Material, environ: dict[str, str]
) -> None:
    status, error = get(Network.from_options(environ=environ), serving(pki.server))
    assert status is None
    assert "(ConnectError): TLS: the certificate of https://127.0.0.1:" in error
    assert "is not signed by a CA this run trusts (unable to get local issuer certificate;" in error
    assert "trusted: certifi's public CAs): give the CA that signed it with --ca-bundle" in error
    wrong = Network.from_options(ca_bundle=str(pki.stranger_ca.cert), environ=environ)
    _, error = get(wrong, serving(pki.server))
    assert f"trusted: the CAs in {pki.stranger_ca.cert} (from --ca-bundle))" in error


def test_an_expired_or_misnamed_certificate_says_so(pki: Material, environ: dict[str, str]) -> None:
    network = Network.from_options(ca_bundle=str(pki.ca.cert), environ=environ)
    _, expired = get(network, serving(pki.expired_server))
    assert "has expired (certificate has expired): it must be renewed" in expired
    _, misnamed = get(network, serving(pki.misnamed_server))
    assert "is not valid for 127.0.0.1 (IP address mismatch" in misnamed
    assert "give the URL by a name or address the certificate carries" in misnamed


def test_insecure_accepts_any_certificate(pki: Material, environ: dict[str, str]) -> None:
    network = Network.from_options(insecure=True, environ=environ)
    for pair in (pki.server, pki.expired_server, pki.misnamed_server):
        assert get(network, serving(pair)) == (200, "")


def test_a_client_certificate_is_shown_when_the_server_asks_for_one(
    pki: Material, environ: dict[str, str]
) -> None:
    tls = serving(pki.server, client_ca=pki.client_ca)
    ca = str(pki.ca.cert)
    shown = Network.from_options(
        ca_bundle=ca, client_cert=str(pki.client.cert), client_key=str(pki.client.key), environ={}
    )
    assert get(shown, tls) == (200, "")
    in_one_file = Network.from_options(ca_bundle=ca, client_cert=str(pki.client_bundle), environ={})
    assert get(in_one_file, tls) == (200, "")


def test_a_missing_or_refused_client_certificate_names_what_to_give(
    pki: Material, environ: dict[str, str]
) -> None:
    tls = serving(pki.server, client_ca=pki.client_ca)
    ca = str(pki.ca.cert)
    _, missing = get(Network.from_options(ca_bundle=ca, environ=environ), tls)
    assert "asks for a client certificate and this run showed none" in missing
    assert "give --client-cert FILE (and --client-key FILE when the key is apart)" in missing
    stranger = pki.stranger_client
    network = Network.from_options(
        ca_bundle=ca, client_cert=str(stranger.cert), client_key=str(stranger.key), environ={}
    )
    _, refused = get(network, tls)
    assert f"refused the client certificate {stranger.cert} (TLSV1_ALERT_UNKNOWN_CA)" in refused
    expired = Network.from_options(
        ca_bundle=ca,
        client_cert=str(pki.expired_client.cert),
        client_key=str(pki.expired_client.key),
        environ={},
    )
    _, refused = get(expired, tls)
    assert f"--client-cert {pki.expired_client.cert}: the certificate expired on " in refused
    with pytest.raises(ConfigurationError, match=r"the certificate expired on .*: renew it"):
        expired.check()


def test_an_encrypted_key_is_refused_before_the_run_never_prompted_for(pki: Material) -> None:
    network = Network.from_options(
        client_cert=str(pki.encrypted_client.cert),
        client_key=str(pki.encrypted_client.key),
        environ={},
    )
    with pytest.raises(ConfigurationError, match="the key is encrypted; give it unencrypted"):
        network.check()


def test_tls_spoken_to_a_plain_http_server_says_so(pki: Material) -> None:
    def plain(conn: socket.socket, server: object) -> None:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")

    with peer(plain) as server:
        network = Network.from_options(ca_bundle=str(pki.ca.cert), environ={})
        with Client(deadline_s=5, breaker=CircuitBreaker(threshold=0), network=network) as client:
            exchange = client.get(server.url.replace("http://", "https://") + "/x")
    assert "does not speak TLS (WRONG_VERSION_NUMBER): is it an http:// URL?" in (
        exchange.error or ""
    )
