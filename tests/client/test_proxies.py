"""Requests through an HTTP proxy (`client.dial`): https through a `CONNECT` tunnel, http in
absolute form, the proxy's credentials from its URL in `Proxy-Authorization` only, NO_PROXY
hosts reached directly; a dead, refusing or silent proxy is one error naming it, within the
deadline, and the request is never sent without it."""

from __future__ import annotations

import shutil
import socket
import ssl
import time
from collections.abc import Iterator

import pytest
import tls_material
from forward_proxy import ForwardProxy, closed_port
from tls_material import Material

from rl_conformance.client.breaker import CircuitBreaker
from rl_conformance.client.http import Client
from rl_conformance.client.network import Network
from rl_conformance.client.reproducers import reproduce
from rl_conformance.redaction import REDACTOR

from .test_http11 import JSON_OK, answer_each, peer


@pytest.fixture(autouse=True)
def forget_secrets() -> Iterator[None]:
    """Proxy credentials are registered with the process's redactor: each test its own."""
    yield
    REDACTOR.forget()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Material:
    return tls_material.make(tmp_path_factory.mktemp("pki"))


def client_of(network: Network, deadline_s: float = 5) -> Client:
    return Client(deadline_s=deadline_s, breaker=CircuitBreaker(threshold=0), network=network)


def https_server(pki: Material) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server.cert, pki.server.key)
    return context


def test_https_goes_through_a_connect_tunnel_and_is_verified_end_to_end(pki: Material) -> None:
    tls = https_server(pki)
    with ForwardProxy().running() as proxy, peer(answer_each(JSON_OK, JSON_OK), tls) as server:
        environ = {"HTTPS_PROXY": proxy.url}
        network = Network.from_options(ca_bundle=str(pki.ca.cert), environ=environ)
        with client_of(network) as client:
            first, second = client.get(server.url + "/v1/models"), client.get(server.url + "/a")
    assert (first.status, second.status) == (200, 200), first.error
    authority = server.url.removeprefix("https://")
    assert [(a.method, a.target) for a in proxy.asked] == [("CONNECT", authority)]
    assert server.connections == 1  # the tunnel is kept and reused
    assert b"GET /v1/models HTTP/1.1" in server.requests[0]


def test_http_goes_to_the_proxy_in_absolute_form() -> None:
    with ForwardProxy().running() as proxy, peer(answer_each(JSON_OK)) as server:
        network = Network.from_options(environ={"http_proxy": proxy.url})
        with client_of(network) as client:
            exchange = client.get(server.url + "/v1/models?x=1")
    assert exchange.status == 200, exchange.error
    assert [(a.method, a.target) for a in proxy.asked] == [("GET", server.url + "/v1/models?x=1")]
    assert server.requests[0].startswith(b"GET /v1/models?x=1 HTTP/1.1\r\n")
    assert b"proxy-authorization" not in server.requests[0].lower()


def test_the_proxy_url_credentials_go_to_the_proxy_alone(pki: Material) -> None:
    with ForwardProxy(credentials=("ci", "s3cr:t")).running() as proxy:
        url = proxy.url.replace("http://", "http://ci:s3cr%3At@")
        serving = https_server(pki)
        with peer(answer_each(JSON_OK), serving) as tls, peer(answer_each(JSON_OK)) as plain:
            network = Network.from_options(ca_bundle=str(pki.ca.cert), proxy=url, environ={})
            with client_of(network) as client:
                secure, clear = client.get(tls.url + "/x"), client.get(plain.url + "/x")
    assert (secure.status, clear.status) == (200, 200), (secure.error, clear.error)
    assert {a.authorization for a in proxy.asked} == {proxy.expected_authorization()}
    assert b"s3cr" not in plain.requests[0] and b"Proxy-Authorization" not in plain.requests[0]
    for exchange in (secure, clear):
        shown = exchange.curl() + str(exchange.wire_log())
        assert "s3cr" not in shown and proxy.expected_authorization() not in shown
        assert '--proxy "$RL_CONFORMANCE_PROXY"' in exchange.curl()
    assert REDACTOR.redact(f"--proxy {url}") == "--proxy $RL_CONFORMANCE_PROXY"


def test_a_reproducer_through_an_authenticating_proxy_replays(pki: Material) -> None:
    """The reproducer names the proxy by its variable; replayed, the proxy URL goes to curl in
    its standard input, and the answer is the same."""
    if shutil.which("curl") is None:
        pytest.skip("needs the curl command")
    with ForwardProxy(credentials=("ci", "r3play-secret")).running() as proxy:
        environ = {"HTTPS_PROXY": proxy.url.replace("http://", "http://ci:r3play-secret@")}
        with peer(answer_each(JSON_OK, JSON_OK), https_server(pki)) as server:
            network = Network.from_options(ca_bundle=str(pki.ca.cert), environ=environ)
            with client_of(network) as client:
                exchange = client.get(server.url + "/v1/models")
            reproducer = exchange.curl()
            replayed = reproduce(reproducer, exchange.wire_log())
    assert '--proxy "$HTTPS_PROXY"' in reproducer and "r3play" not in reproducer
    assert replayed.reproduced is True, replayed.detail
    assert [a.method for a in proxy.asked] == ["CONNECT", "CONNECT"]
    assert {a.authorization for a in proxy.asked} == {proxy.expected_authorization()}


@pytest.mark.parametrize("given", [False, True], ids=["none", "wrong"])
def test_a_proxy_asking_for_credentials_says_what_to_give(pki: Material, given: bool) -> None:
    with ForwardProxy(credentials=("ci", "right")).running() as proxy:
        url = proxy.url.replace("http://", "http://ci:wrong@") if given else proxy.url
        with peer(answer_each(JSON_OK), https_server(pki)) as server:
            network = Network.from_options(ca_bundle=str(pki.ca.cert), proxy=url, environ={})
            with client_of(network) as client:
                exchange = client.get(server.url + "/x")
        assert server.connections == 0
    expected = (
        "it refused the credentials in the proxy's URL"
        if given
        else "it asks for credentials: give them in the proxy's URL (http://USER:PASSWORD@"
    )
    assert f"(ProxyError): the proxy {proxy.url} (from --proxy) refused CONNECT" in (
        exchange.error or ""
    )
    assert expected in (exchange.error or "") and "wrong" not in (exchange.error or "")


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_dead_proxy_is_named_and_nothing_goes_directly(pki: Material, scheme: str) -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    tls = https_server(pki) if scheme == "https" else None
    with peer(answer_each(JSON_OK), tls) as server:
        variable = "HTTPS_PROXY" if scheme == "https" else "HTTP_PROXY"
        network = Network.from_options(ca_bundle=str(pki.ca.cert), environ={variable: dead})
        with client_of(network) as client:
            exchange = client.get(server.url + "/v1/models")
        time.sleep(0.1)
        assert server.connections == 0
    assert exchange.status is None
    assert f"(ProxyError): the proxy {dead} (from {variable}) could not be reached (" in (
        exchange.error or ""
    )
    assert "the request was not sent without it" in (exchange.error or "")


def test_a_proxy_that_never_answers_is_cut_at_the_deadline() -> None:
    silent = socket.create_server(("127.0.0.1", 0))
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        network = Network.from_options(environ={"HTTPS_PROXY": url})
        started = time.monotonic()
        with client_of(network, deadline_s=0.5) as client:
            exchange = client.get("https://127.0.0.1:9/v1/models")
        took = time.monotonic() - started
    finally:
        silent.close()
    assert exchange.error == "no complete response within the 0.5 s deadline"
    assert took < 2


def test_no_proxy_hosts_and_the_runs_own_deployments_are_reached_directly() -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    with peer(answer_each(JSON_OK)) as exempt, peer(answer_each(JSON_OK)) as launched:
        by_variable = Network.from_options(environ={"HTTP_PROXY": dead, "NO_PROXY": "127.0.0.1"})
        with client_of(by_variable) as client:
            assert client.get(exempt.url + "/x").status == 200
        started_here = Network.from_options(environ={"HTTP_PROXY": dead})
        started_here.reach_directly(launched.url)
        with client_of(started_here) as client:
            assert client.get(launched.url + "/x").status == 200


def test_a_proxy_given_and_exempted_routes_by_host() -> None:
    """One run, two deployments: the one NO_PROXY names directly, the other through the proxy."""
    with ForwardProxy().running() as proxy, peer(answer_each(JSON_OK)) as server:
        network = Network.from_options(proxy=proxy.url, no_proxy="localhost", environ={})
        with client_of(network) as client:
            direct = client.get(server.url.replace("127.0.0.1", "localhost") + "/x")
            proxied = client.get(server.url + "/y")
    assert (direct.status, proxied.status) == (200, 200)
    assert [a.target for a in proxy.asked] == [server.url + "/y"]
