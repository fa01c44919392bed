"""How the harness reaches a deployment: the certificates it trusts, the client certificate it
shows, and the HTTP proxy each URL goes through. Flags first, else the variables curl, requests
and httpx read, so that a run reaches what `curl` reaches from the same shell:

- trust: `--ca-bundle`, else the first of `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`,
  `SSL_CERT_FILE` (a file) or `SSL_CERT_DIR` (a directory), else certifi's public CAs (httpx's
  default). A bundle replaces the default, as it does for those clients. `--insecure` verifies
  nothing, and every report says so.
- the client certificate: `--client-cert` (with its key, or `--client-key`); no variable.
- proxies: `--proxy` for every URL, else `https_proxy`/`HTTPS_PROXY` for https URLs,
  `http_proxy`/`HTTP_PROXY` for http ones, `all_proxy`/`ALL_PROXY` for both (lower case first);
  `--no-proxy`, else `no_proxy`/`NO_PROXY`, lists the hosts reached directly, matched as curl
  matches them (`bypasses`). A proxy is an `http://` URL with a port; its credentials
  (`http://USER:PASSWORD@HOST:PORT`) go in `Proxy-Authorization` and nowhere else.

A deployment the run starts on this machine (our fakes, `--launch dynamo-*`) listens on
loopback and is reached directly (`Network.reach_directly`): a proxy cannot reach this machine's
loopback, and the run told nobody those URLs.
"""

from __future__ import annotations

import base64
import functools
import ipaddress
import os
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from ..errors import ConfigurationError
from ..model.config import RunConfig
from ..redaction import REDACTOR

CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE")
CA_DIRECTORY_VARIABLE = "SSL_CERT_DIR"
PROXY_VARIABLES: Mapping[str, tuple[str, ...]] = {
    "https": ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"),
    "http": ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"),
}
NO_PROXY_VARIABLES = ("no_proxy", "NO_PROXY")
PROXY_REFERENCE = "$RL_CONFORMANCE_PROXY"
"""What a `--proxy` URL with credentials is written as (set it to replay a reproducer)."""
DEFAULT_TRUST = "certifi's public CAs"


@dataclass(frozen=True)
class Proxy:
    """An HTTP proxy: https URLs go through a `CONNECT` tunnel, http URLs in absolute form."""

    host: str
    port: int
    source: str
    """Where it was given (`--proxy`, `HTTPS_PROXY`, ...): named in every message about it."""
    authorization: str | None = field(default=None, repr=False)
    """The `Proxy-Authorization` value its URL's credentials make; never shown."""
    reference: str | None = None
    """With credentials: the shell reference that stands for its whole URL wherever it would be
    written (`$HTTPS_PROXY`; `$RL_CONFORMANCE_PROXY` for `--proxy`), and that a reproducer
    gives curl."""

    @property
    def url(self) -> str:
        """The proxy's URL without its credentials: what messages, notes and reproducers show."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def shown(self) -> str:
        return f"the proxy {self.url} (from {self.source})"


def parse_proxy(value: str, source: str) -> Proxy:
    """A proxy URL as curl takes it (`HOST:PORT` means `http://HOST:PORT`); a
    `ConfigurationError` naming `source` for any other kind of proxy or a missing port."""
    text = value.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ConfigurationError(f"{source}: not a usable proxy URL: {exc}") from exc
    if parts.scheme.lower() != "http":
        raise ConfigurationError(
            f"{source}: expected an http:// proxy URL (an HTTP proxy: https URLs go through its "
            f"CONNECT tunnel), observed a {parts.scheme}:// proxy, which the suite does not speak"
        )
    if not parts.hostname:
        raise ConfigurationError(f"{source}: the proxy URL names no host")
    if port is None:
        raise ConfigurationError(
            f"{source}: give the proxy's port (http://{parts.hostname}:PORT): clients disagree "
            "on the default (curl assumes 1080, Python's clients 80)"
        )
    if parts.username is None and parts.password is None:
        return Proxy(parts.hostname, port, source)
    reference = f"${source}" if source.isidentifier() else PROXY_REFERENCE
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    token = base64.b64encode(pair.encode()).decode("ascii")
    for secret, stands_for in (
        (value.strip(), reference),
        (parts.netloc.rpartition("@")[0], f"{reference}_USERINFO"),
        (unquote(parts.password or ""), f"{reference}_PASSWORD"),
        (token, f"{reference}_BASIC"),
    ):
        if secret:
            REDACTOR.add(secret, stands_for)
    return Proxy(parts.hostname, port, source, f"Basic {token}", reference)


def bypasses(host: str, no_proxy: str) -> bool:
    """Whether `no_proxy` (a comma- or blank-separated list) exempts `host` from the proxy, as
    curl decides: `*` exempts every host; a name exempts itself and its subdomains (a leading
    or trailing dot aside: `example.com` covers `www.example.com`, not `notexample.com`); an
    IP address, or a CIDR range, exempts the addresses it covers, and only those (a name never
    covers an address). Ports are not part of the match."""
    tokens = no_proxy.replace(",", " ").split()
    if "*" in tokens:
        return True
    bare = host.strip("[]")
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        address = None
    name = bare.rstrip(".").lower()
    for token in tokens:
        if address is not None:
            try:
                if address in ipaddress.ip_network(token.strip("[]"), strict=False):
                    return True
            except ValueError:
                continue
            continue
        pattern = token.rstrip(".").removeprefix(".").lower()
        if pattern and (name == pattern or name.endswith("." + pattern)):
            return True
    return False


@dataclass(frozen=True)
class Trust:
    """Which server certificates a run accepts and which certificate it shows."""

    ca: str | None = None
    """A PEM file or a directory of CA certificates; None: certifi's."""
    ca_source: str = ""
    """Where `ca` was given: `--ca-bundle` or the variable's name."""
    client_cert: str | None = None
    client_key: str | None = None
    insecure: bool = False

    @property
    def shown(self) -> str:
        """What the run trusts, for messages and notes."""
        if self.insecure:
            return "no certificate verification (--insecure)"
        if self.ca is None:
            return DEFAULT_TRUST
        return f"the CAs in {self.ca} (from {self.ca_source})"

    def context(self) -> ssl.SSLContext:
        """A client TLS context (HTTP/1.1 offered by ALPN); `ConfigurationError` naming the
        flag or variable whose file cannot be used."""
        if self.insecure:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:  # only these CAs: the system's store is not read besides them
            cafile, capath = self._locations()
            try:
                context = ssl.create_default_context(cafile=cafile, capath=capath)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigurationError(
                    f"{self.ca_source} {self.ca}: no PEM CA certificate could be read from it "
                    f"({exc})"
                ) from exc
        context.set_alpn_protocols(["http/1.1"])
        if self.client_cert is not None:
            self._load_client_certificate(context)
        return context

    def _locations(self) -> tuple[str | None, str | None]:
        """The CA file and directory to trust (one of them)."""
        if self.ca is None:
            import certifi

            return certifi.where(), None
        if not os.path.exists(self.ca):
            raise ConfigurationError(f"{self.ca_source} {self.ca}: no such file or directory")
        return (None, self.ca) if os.path.isdir(self.ca) else (self.ca, None)

    def _check_validity(self) -> None:
        """An expired client certificate is refused here, by its date: a server refuses it
        without saying why (nginx answers 400 "The SSL certificate error" to any bad one)."""
        try:
            decoded = ssl._ssl._test_decode_cert(self.client_cert)  # type: ignore[attr-defined]
            ends = ssl.cert_time_to_seconds(decoded["notAfter"])
        except (AttributeError, KeyError, OSError, ValueError, ssl.SSLError):
            return  # not readable so: load_cert_chain says what is wrong with it
        if ends < time.time():
            raise ConfigurationError(
                f"--client-cert {self.client_cert}: the certificate expired on "
                f"{decoded['notAfter']}: renew it"
            )

    def _load_client_certificate(self, context: ssl.SSLContext) -> None:
        def no_password() -> str:
            raise ConfigurationError(
                f"--client-key {self.client_key or self.client_cert}: the key is encrypted; "
                "give it unencrypted (openssl pkey -in KEY -out KEY.plain), readable by you only"
            )

        self._check_validity()
        try:
            context.load_cert_chain(self.client_cert or "", self.client_key, password=no_password)
        except FileNotFoundError as exc:
            raise ConfigurationError(
                f"--client-cert/--client-key: {exc.filename}: no such file"
            ) from exc
        except ssl.SSLError as exc:
            raise ConfigurationError(
                f"--client-cert {self.client_cert}"
                + (f" --client-key {self.client_key}" if self.client_key else "")
                + f": not a PEM certificate with its matching private key ({exc.reason or exc}); "
                "give the key with --client-key when it is in a file of its own"
            ) from exc


class Network:
    """The trust, client certificate and proxies one client uses; safe to share between
    threads. `Network()` reaches everything directly and trusts certifi's CAs."""

    def __init__(
        self,
        *,
        trust: Trust | None = None,
        proxies: Mapping[str, Proxy] | None = None,
        no_proxy: str = "",
    ) -> None:
        self.trust = trust or Trust()
        self.proxies = dict(proxies or {})
        self.no_proxy = no_proxy
        self._direct: set[str] = set()
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None

    @classmethod
    def from_options(
        cls,
        *,
        ca_bundle: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
        insecure: bool = False,
        proxy: str | None = None,
        no_proxy: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Network:
        """From the flags, and the environment (`os.environ` unless given) where a flag is
        absent; `ConfigurationError` naming the flag or variable that cannot be used. A CA file
        is read when the first https URL needs it (`check` reads it at once): a variable naming
        a missing file stops no run that reaches no https URL."""
        env = os.environ if environ is None else environ
        if client_key is not None and client_cert is None:
            raise ConfigurationError("--client-key needs --client-cert (the certificate it signs)")
        ca, ca_source = ca_bundle, "--ca-bundle"
        if ca is None:
            ca_source = next((name for name in CA_VARIABLES if env.get(name)), "")
            ca = env.get(ca_source) if ca_source else None
        if ca is None and env.get(CA_DIRECTORY_VARIABLE):
            ca, ca_source = env[CA_DIRECTORY_VARIABLE], CA_DIRECTORY_VARIABLE
        trust = Trust(ca, ca_source, client_cert, client_key, insecure)
        proxies: dict[str, Proxy] = {}
        for scheme, names in PROXY_VARIABLES.items():
            if proxy is not None:
                proxies[scheme] = parse_proxy(proxy, "--proxy")
                continue
            name = next((name for name in names if env.get(name, "").strip()), None)
            if name is not None:
                proxies[scheme] = parse_proxy(env[name], name)
        if no_proxy is None:
            no_proxy = next((env[name] for name in NO_PROXY_VARIABLES if name in env), "")
        return cls(trust=trust, proxies=proxies, no_proxy=no_proxy)

    def check(self) -> None:
        """Build the TLS context now, so that a file that cannot be used is refused before the
        run starts (`ConfigurationError`), not at its first https request."""
        self.tls()

    def tls(self) -> ssl.SSLContext:
        """The TLS context, built once, at the first https URL (building one reads a whole CA
        bundle: tens of milliseconds)."""
        with self._lock:
            if self._context is None:
                self._context = self.trust.context()
            return self._context

    def proxy_for(self, scheme: str, host: str) -> Proxy | None:
        """The proxy a request to `host` goes through, or None (directly)."""
        proxy = self.proxies.get(scheme)
        if proxy is None:
            return None
        key = host.strip("[]").lower()
        if key in self._direct or bypasses(host, self.no_proxy):
            return None
        return proxy

    def curl_options(self, url: str) -> tuple[str, ...]:
        """What a `curl` reproducer of a request to `url` needs to go the same way: the CA
        bundle, the client certificate, `-k`, the proxy (by its reference when it has
        credentials: `"$HTTPS_PROXY"`) or none."""
        if not self.proxies and (
            self.trust == DEFAULT_TRUST_SETTINGS or not url.startswith("https:")
        ):
            return ()
        parts = urlsplit(url)
        scheme, host = parts.scheme.lower(), parts.hostname or ""
        options: list[str] = []
        if scheme == "https":
            trust = self.trust
            if trust.insecure:
                options.append("-k")
            elif trust.ca is not None:
                options += ["--capath" if os.path.isdir(trust.ca) else "--cacert", trust.ca]
            if trust.client_cert is not None:
                options += ["--cert", trust.client_cert]
            if trust.client_key is not None:
                options += ["--key", trust.client_key]
        proxy = self.proxy_for(scheme, host)
        if proxy is not None:
            options += ["--proxy", proxy.reference or proxy.url]
        elif scheme in self.proxies:
            options += ["--noproxy", "*"]
        return tuple(options)

    def routes(self, urls: list[str]) -> list[str]:
        """How each URL the user gave is reached, when a proxy is set at all: the line a run
        prints first, so that a proxy set for the other scheme is not a surprise."""
        if not self.proxies:
            return []
        found = []
        for url in dict.fromkeys(urls):
            parts = urlsplit(url)
            scheme, host = parts.scheme.lower(), parts.hostname or ""
            proxy = self.proxy_for(scheme, host)
            if proxy is not None:
                found.append(f"{url} through {proxy.shown}")
            elif scheme in self.proxies:
                found.append(f"{url} directly (the no-proxy list {self.no_proxy!r} names it)")
            else:
                others = ", ".join(sorted({p.source for p in self.proxies.values()}))
                found.append(
                    f"{url} directly: no {scheme} proxy is set ({others} is for "
                    f"{' and '.join(sorted(self.proxies))} URLs)"
                )
        return found

    def reach_directly(self, url: str) -> None:
        """Reach this URL's host without a proxy from now on: a deployment the run started on
        this machine."""
        host = urlsplit(url).hostname
        if host:
            with self._lock:
                self._direct.add(host.lower())

    def warnings(self) -> list[str]:
        """What every report of the run must open with."""
        return [INSECURE_LINE] if self.trust.insecure else []

    def notes(self) -> list[str]:
        """How the run reaches deployments, when it is not the default (no credentials)."""
        found = []
        if self.trust.insecure:
            found.append("https certificates NOT verified (--insecure)")
        elif self.trust.ca is not None:
            found.append(f"https certificates verified against {self.trust.shown}")
        if self.trust.client_cert is not None:
            found.append(f"client certificate {self.trust.client_cert} shown to https servers")
        for scheme, proxy in sorted(self.proxies.items()):
            exempt = f", except for {self.no_proxy!r}" if self.no_proxy else ""
            found.append(f"{scheme} URLs through {proxy.shown}{exempt}")
        return found


DEFAULT_TRUST_SETTINGS = Trust()

INSECURE_LINE = (
    "TLS CERTIFICATES WERE NOT VERIFIED (--insecure): any server could have answered for the "
    "https deployments of this run"
)
"""The line every report of a run with `--insecure` opens with."""


def network_of(config: RunConfig, environ: Mapping[str, str] | None = None) -> Network:
    """The network of a run of `config`; its TLS context is built at once when a URL the user
    gave is https, so that an unusable certificate file is refused before anything starts."""
    network = Network.from_options(
        ca_bundle=config.ca_bundle,
        client_cert=config.client_cert,
        client_key=config.client_key,
        insecure=config.insecure,
        proxy=config.proxy,
        no_proxy=config.no_proxy,
        environ=environ,
    )
    given = (config.frontend, config.rl_url, *config.worker_url)
    if config.client_cert or any((url or "").startswith("https://") for url in given):
        network.check()
    return network


@functools.cache
def direct() -> Network:
    """The network of the harness's calls to what it started itself: no proxy, default trust."""
    return Network()
