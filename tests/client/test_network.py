"""How a run reaches deployments (`client.network`): the proxy and trust each flag or variable
gives, NO_PROXY matched as curl matches it, and every unusable input refused naming its flag or
variable."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from rl_conformance.client.network import INSECURE_LINE, Network, bypasses, parse_proxy
from rl_conformance.errors import ConfigurationError
from rl_conformance.redaction import REDACTOR


@pytest.fixture(autouse=True)
def forget_secrets() -> Iterator[None]:
    """Proxy credentials are registered with the process's redactor: each test its own."""
    yield
    REDACTOR.forget()


@pytest.mark.parametrize(
    ("host", "no_proxy", "exempt"),
    [
        ("example.com", "example.com", True),
        ("www.example.com", "example.com", True),
        ("www.example.com", ".example.com", True),
        ("example.com", ".example.com", True),
        ("EXAMPLE.com.", "example.COM", True),
        ("notexample.com", "example.com", False),
        ("example.com.org", "example.com", False),
        ("anything.test", "*", True),
        ("anything.test", "a.test, *", True),
        ("b.test", "a.test , b.test", True),
        ("b.test", "a.test b.test", True),
        ("b.test", "", False),
        ("10.1.2.3", "10.0.0.0/8", True),
        ("11.1.2.3", "10.0.0.0/8", False),
        ("127.0.0.1", "127.0.0.1", True),
        ("127.0.0.1", "localhost", False),
        ("localhost", "127.0.0.1", False),
        ("::1", "::1", True),
        ("[::1]", "[::1]", True),
        ("fd00::5", "fd00::/8", True),
        ("1.2.3.4", "3.4", False),
        ("host.test", "host.test:8000", False),
    ],
)
def test_no_proxy_exempts_hosts_as_curl_does(host: str, no_proxy: str, exempt: bool) -> None:
    assert bypasses(host, no_proxy) is exempt


def test_each_scheme_takes_its_variable_lower_case_first_and_all_proxy_last() -> None:
    network = Network.from_options(
        environ={
            "https_proxy": "http://lower:3128",
            "HTTPS_PROXY": "http://upper:3128",
            "ALL_PROXY": "http://every:3128",
        }
    )
    https, http = network.proxy_for("https", "a.test"), network.proxy_for("http", "a.test")
    assert https is not None and (https.host, https.source) == ("lower", "https_proxy")
    assert http is not None and (http.host, http.source) == ("every", "ALL_PROXY")


def test_the_flags_win_over_the_environment() -> None:
    environ = {"HTTPS_PROXY": "http://env:3128", "NO_PROXY": "flag.test"}
    network = Network.from_options(proxy="flagged:8080", no_proxy="", environ=environ)
    for scheme in ("http", "https"):
        proxy = network.proxy_for(scheme, "flag.test")
        assert proxy is not None and (proxy.host, proxy.port, proxy.source) == (
            "flagged",
            8080,
            "--proxy",
        )
    assert Network.from_options(no_proxy="*", environ=environ).proxy_for("https", "a") is None


def test_no_proxy_from_the_environment_exempts_hosts() -> None:
    environ = {"https_proxy": "http://p:1", "no_proxy": ".internal,10.0.0.0/8"}
    network = Network.from_options(environ=environ)
    assert network.proxy_for("https", "api.internal") is None
    assert network.proxy_for("https", "10.9.8.7") is None
    assert network.proxy_for("https", "api.example") is not None


def test_the_hosts_the_run_started_are_reached_directly() -> None:
    network = Network.from_options(environ={"HTTP_PROXY": "http://p:1"})
    assert network.proxy_for("http", "127.0.0.1") is not None
    network.reach_directly("http://127.0.0.1:8000/v1")
    assert network.proxy_for("http", "127.0.0.1") is None


def test_credentials_of_a_proxy_url_become_its_authorization_and_are_never_shown() -> None:
    proxy = parse_proxy("http://user%40corp:p%3Ass@proxy.test:3128/", "HTTPS_PROXY")
    expected = "Basic " + base64.b64encode(b"user@corp:p:ss").decode()
    assert proxy.authorization == expected
    assert proxy.url == "http://proxy.test:3128"
    for shown in (proxy.shown, repr(proxy)):
        assert "p:ss" not in shown and "p%3Ass" not in shown and "user" not in shown
    notes = " ".join(Network(proxies={"https": proxy}).notes())
    assert "http://proxy.test:3128 (from HTTPS_PROXY)" in notes
    assert "p:ss" not in notes and "user@corp" not in notes


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("https://proxy.test:3128", "expected an http:// proxy URL"),
        ("socks5://proxy.test:1080", "a socks5:// proxy, which the suite does not speak"),
        ("http://proxy.test", "give the proxy's port"),
        ("http://:3128", "names no host"),
        ("http://proxy.test:99999", "not a usable proxy URL"),
    ],
)
def test_an_unusable_proxy_is_refused_naming_its_variable(value: str, expected: str) -> None:
    with pytest.raises(ConfigurationError, match="^HTTPS_PROXY: .*" + expected):
        Network.from_options(environ={"HTTPS_PROXY": value})


def test_the_ca_bundle_comes_from_the_flag_then_the_variables(tmp_path: Path) -> None:
    first, second = tmp_path / "a.pem", tmp_path / "b.pem"
    first.touch()
    second.touch()
    environ = {"SSL_CERT_FILE": str(second), "REQUESTS_CA_BUNDLE": str(first)}
    assert Network.from_options(environ=environ).trust.ca_source == "REQUESTS_CA_BUNDLE"
    assert Network.from_options(environ={"SSL_CERT_DIR": str(tmp_path)}).trust.ca == str(tmp_path)
    flagged = Network.from_options(ca_bundle=str(second), environ=environ)
    assert (flagged.trust.ca, flagged.trust.ca_source) == (str(second), "--ca-bundle")
    assert Network.from_options(environ={}).trust.ca is None


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"ca_bundle": "/nowhere/ca.pem"}, r"^--ca-bundle /nowhere/ca.pem: no such file"),
        ({"environ": {"SSL_CERT_FILE": "/nowhere.pem"}}, r"^SSL_CERT_FILE /nowhere.pem: no such"),
    ],
)
def test_a_missing_file_is_refused_naming_its_flag_or_variable(
    options: dict[str, object], expected: str
) -> None:
    options.setdefault("environ", {})
    network = Network.from_options(**options)  # type: ignore[arg-type]
    network.proxy_for("http", "a.test")  # an http run reads no CA file
    with pytest.raises(ConfigurationError, match=expected):
        network.check()
    with pytest.raises(ConfigurationError, match=r"^--client-key needs --client-cert"):
        Network.from_options(client_key="/k.pem", environ={})


def test_a_file_that_holds_no_certificate_is_refused_before_the_run(tmp_path: Path) -> None:
    empty = tmp_path / "empty.pem"
    empty.write_text("not a certificate\n")
    network = Network.from_options(ca_bundle=str(empty), environ={})
    with pytest.raises(ConfigurationError, match=r"^--ca-bundle .*empty\.pem: no PEM CA certif"):
        network.check()
    client = Network.from_options(client_cert=str(empty), environ={})
    with pytest.raises(ConfigurationError, match=r"^--client-cert .*: not a PEM certificate"):
        client.check()


def test_insecure_is_said_in_the_notes_and_reads_no_bundle() -> None:
    network = Network.from_options(insecure=True, environ={"SSL_CERT_FILE": "/nowhere.pem"})
    network.check()
    assert network.warnings() == [INSECURE_LINE]
    assert network.notes()[0] == "https certificates NOT verified (--insecure)"
    assert Network.from_options(environ={}).warnings() == []


def test_a_reproducer_goes_the_way_the_request_went(tmp_path: Path) -> None:
    ca, cert, key = (tmp_path / name for name in ("ca.pem", "c.pem", "k.pem"))
    ca.touch()
    environ = {"HTTPS_PROXY": "http://u:pw@p.test:3128", "NO_PROXY": "near.test"}
    network = Network.from_options(
        ca_bundle=str(ca), client_cert=str(cert), client_key=str(key), environ=environ
    )
    assert network.curl_options("https://far.test/v1") == (
        "--cacert", str(ca), "--cert", str(cert), "--key", str(key),
        "--proxy", "$HTTPS_PROXY",
    )  # fmt: skip
    plain = Network.from_options(environ={"HTTPS_PROXY": "http://p.test:3128"})
    assert plain.curl_options("https://far.test/") == ("--proxy", "http://p.test:3128")
    assert network.curl_options("https://near.test/v1")[-2:] == ("--noproxy", "*")
    assert network.curl_options("http://far.test/v1") == ()  # no http proxy, no TLS
    insecure = Network.from_options(insecure=True, environ={})
    assert insecure.curl_options("https://a.test/") == ("-k",)
    assert Network.from_options(environ={}).curl_options("https://a.test/") == ()


def test_a_run_says_how_each_url_given_is_reached_when_a_proxy_is_set() -> None:
    environ = {"HTTPS_PROXY": "http://p.test:3128", "NO_PROXY": "near.test"}
    network = Network.from_options(environ=environ)
    assert network.routes(["https://far.test:8000", "https://near.test", "http://far.test"]) == [
        "https://far.test:8000 through the proxy http://p.test:3128 (from HTTPS_PROXY)",
        "https://near.test directly (the no-proxy list 'near.test' names it)",
        "http://far.test directly: no http proxy is set (HTTPS_PROXY is for https URLs)",
    ]
    assert Network.from_options(environ={}).routes(["http://far.test"]) == []
