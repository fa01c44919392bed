"""Opening a connection to an origin as the run's `network.Network` says: directly or through
an HTTP proxy (a `CONNECT` tunnel for https, absolute-form requests for http), TLS on top where
the URL says https; every step bounded by what is left of the request's deadline.

A request whose proxy cannot be reached fails naming the proxy: it is never sent without it. A
TLS failure says what went wrong and what to give: the CA that signed the server's
certificate, a client certificate, or a URL by a name the certificate carries.
"""

from __future__ import annotations

import socket
import ssl
import time

from ..errors import ConfigurationError
from ..version import __version__
from .http11 import Address, Connection, WireError, WireTimeout, read_head, time_left
from .network import Network, Proxy, Trust

EXPIRED, NOT_YET_VALID = 10, 9
NAME_MISMATCH = frozenset({62, 64})
"""OpenSSL's verify codes: a certificate past its end, before its start, for another host or
address."""
CLIENT_CERTIFICATE_REQUIRED = "TLSV13_ALERT_CERTIFICATE_REQUIRED"
CLIENT_CERTIFICATE_REFUSED = frozenset(
    {
        "SSLV3_ALERT_BAD_CERTIFICATE",
        "SSLV3_ALERT_CERTIFICATE_EXPIRED",
        "SSLV3_ALERT_CERTIFICATE_REVOKED",
        "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
        "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE",
        "TLSV1_ALERT_UNKNOWN_CA",
        "TLSV1_ALERT_ACCESS_DENIED",
    }
)
"""The alerts a server sends about the client's certificate (or its absence, before TLS 1.3)."""
ALERT_WAIT_S = 1.0
"""How long a failed write waits for the alert that explains it (within the deadline)."""
CA_FIX = "give the CA that signed it with --ca-bundle FILE (or REQUESTS_CA_BUNDLE, SSL_CERT_FILE)"
CERT_FIX = "give --client-cert FILE (and --client-key FILE when the key is apart)"


def dial(address: Address, at: float, network: Network, proxy: Proxy | None) -> Connection:
    """A connection to `address`'s origin through `proxy` (None: directly), ready for a request;
    `WireError` naming what failed (the proxy, the tunnel, the handshake), `WireTimeout` once
    `at` has passed. Its route is `(origin, proxy)`."""
    route = (*address.origin, proxy)
    if proxy is None:
        sock = _tcp(address.host, address.port, at, None)
    else:
        sock = _tcp(proxy.host, proxy.port, at, proxy)
    try:
        if proxy is not None and address.scheme == "https":
            _tunnel(sock, address, proxy, at)
        if address.scheme == "https":
            sock = _handshake(sock, address, network, at)
    except BaseException:
        sock.close()
        raise
    if address.scheme != "https":
        return Connection(sock, route)
    trust = network.trust

    def explain(exc: OSError, at: float) -> str | None:
        if isinstance(exc, ssl.SSLEOFError):
            exc = _alert_behind(sock, at) or exc
        return tls_failure(exc, address, trust) if isinstance(exc, ssl.SSLError) else None

    return Connection(sock, route, explain=explain)


def _alert_behind(sock: socket.socket, at: float) -> ssl.SSLError | None:
    """The alert a server sent before closing, when a write found the connection closed: after
    the handshake (TLS 1.3), a refused client certificate is told only so."""
    try:
        sock.settimeout(min(ALERT_WAIT_S, max(at - time.monotonic(), 0.001)))
        sock.recv(1)
    except ssl.SSLError as exc:
        return exc if exc.reason else None
    except OSError:
        return None
    return None


def _tcp(host: str, port: int, at: float, proxy: Proxy | None) -> socket.socket:
    try:
        sock = socket.create_connection((host, port), timeout=time_left(at, "ConnectTimeout"))
    except TimeoutError as exc:
        where = "" if proxy is None else f" to {proxy.shown}"
        raise WireTimeout("ConnectTimeout", f"connecting{where} timed out") from exc
    except OSError as exc:
        why = str(exc) or type(exc).__name__
        if proxy is None:
            raise WireError("ConnectError", why) from exc
        raise WireError(
            "ProxyError",
            f"{proxy.shown} could not be reached ({why}); the request was not sent without it",
        ) from exc
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _tunnel(sock: socket.socket, address: Address, proxy: Proxy, at: float) -> None:
    """Ask the proxy for a tunnel to the origin (`CONNECT host:port`)."""
    host = f"[{address.host}]" if ":" in address.host else address.host
    authority = f"{host}:{address.port}"
    lines = [
        f"CONNECT {authority} HTTP/1.1",
        f"Host: {authority}",
        f"User-Agent: dynamo-rl-conformance/{__version__}",
    ]
    if proxy.authorization is not None:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    connection = Connection(sock, ("http", proxy.host, proxy.port))
    asked = f"CONNECT {authority}"
    try:
        connection.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), at)
        head = read_head(connection, at)
    except WireTimeout as exc:
        raise WireTimeout(exc.kind, f"{proxy.shown} did not answer {asked} in time") from exc
    except WireError as exc:
        raise WireError("ProxyError", f"{proxy.shown} did not answer {asked}: {exc}") from exc
    if not 200 <= head.status < 300:
        raise WireError("ProxyError", f"{proxy.shown} refused {asked}: {_refusal(head, proxy)}")
    if connection.buffer:
        raise WireError(
            "ProxyError", f"{proxy.shown} sent bytes of its own after its answer to {asked}"
        )


def _refusal(head: object, proxy: Proxy) -> str:
    status = getattr(head, "status", 0)
    if status == 407 and proxy.authorization is None:
        return (
            "HTTP 407, it asks for credentials: give them in the proxy's URL "
            "(http://USER:PASSWORD@HOST:PORT)"
        )
    if status == 407:
        return "HTTP 407, it refused the credentials in the proxy's URL"
    return f"HTTP {status}"


def _handshake(sock: socket.socket, address: Address, network: Network, at: float) -> ssl.SSLSocket:
    try:
        context = network.tls()
    except ConfigurationError as exc:
        raise WireError("ConnectError", str(exc)) from exc
    try:
        sock.settimeout(time_left(at, "ConnectTimeout"))
        return context.wrap_socket(sock, server_hostname=address.host)
    except TimeoutError as exc:
        raise WireTimeout("ConnectTimeout", "the TLS handshake timed out") from exc
    except ssl.SSLError as exc:
        raise WireError("ConnectError", tls_failure(exc, address, network.trust)) from exc
    except OSError as exc:
        raise WireError("ConnectError", str(exc) or type(exc).__name__) from exc


def tls_failure(exc: ssl.SSLError, address: Address, trust: Trust) -> str:
    """What a TLS failure with `address` means for the user, and what to give."""
    where = f"https://{address.authority}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = exc.verify_message or exc.reason or str(exc)
        if exc.verify_code == EXPIRED:
            return f"TLS: the certificate of {where} has expired ({why}): it must be renewed"
        if exc.verify_code == NOT_YET_VALID:
            return f"TLS: the certificate of {where} is not valid yet ({why}): check the clocks"
        if exc.verify_code in NAME_MISMATCH:
            return (
                f"TLS: the certificate of {where} is not valid for {address.host} ({why}): "
                "give the URL by a name or address the certificate carries"
            )
        return (
            f"TLS: the certificate of {where} is not signed by a CA this run trusts ({why}; "
            f"trusted: {trust.shown}): {CA_FIX}"
        )
    reason = exc.reason or ""
    if reason == CLIENT_CERTIFICATE_REQUIRED or (
        reason in CLIENT_CERTIFICATE_REFUSED and trust.client_cert is None
    ):
        return (
            f"TLS: {where} asks for a client certificate and this run showed none ({reason}): "
            f"{CERT_FIX}"
        )
    if reason in CLIENT_CERTIFICATE_REFUSED:
        return (
            f"TLS: {where} refused the client certificate {trust.client_cert} ({reason}): give "
            "one its CA signed, within its validity"
        )
    if reason == "WRONG_VERSION_NUMBER":
        return f"TLS: {where} does not speak TLS ({reason}): is it an http:// URL?"
    return f"TLS with {where} failed: {exc}"
