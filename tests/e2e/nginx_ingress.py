"""A real nginx (Debian's package) on loopback in front of a deployment's frontend and RL
listener, as an operator puts one: TLS with a certificate its own CA signed (client certificates
asked for when the test says so), gzip on JSON, its default proxy buffering (event streams
included: neither Dynamo nor our fakes send `X-Accel-Buffering`), keep-alive to the client and
to the upstream, and bearer authentication when given a token. Started with a configuration the
test writes, in a directory of its own, and stopped by the test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tls_material import Pair

READY_S = 10.0


@dataclass(frozen=True)
class Route:
    """One TLS server of the ingress: what it listens on and the upstream it proxies."""

    name: str
    upstream: str
    port: int

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def configuration(
    directory: Path,
    routes: list[Route],
    server: Pair,
    *,
    client_ca: Path | None = None,
    token: str | None = None,
    expired_token: str | None = None,
) -> str:
    """nginx.conf: one TLS server per route, each proxying its upstream with nginx's defaults
    (proxy buffering on) and keep-alive connections to it; with `token`, a request without
    `Authorization: Bearer <token>` is answered 401, and `expired_token` is refused as an
    expired one is (RFC 6750's `invalid_token` with its description)."""
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers write the temporary files
    temporary = "\n".join(
        f"    {kind}_temp_path {directory / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    verify = (
        f"        ssl_client_certificate {client_ca};\n        ssl_verify_client on;\n"
        if client_ca
        else ""
    )
    expired = f'        "Bearer {expired_token}" 2;\n' if expired_token else ""
    auth = (
        "    map $http_authorization $refused {\n        default 1;\n"
        f'        "Bearer {token}" 0;\n{expired}    }}\n'
        if token
        else ""
    )
    challenge = 'Bearer realm="ingress"'
    expiry = f'{challenge}, error="invalid_token", error_description="The access token expired"'
    refuse = (
        "            if ($refused = 1) {\n"
        f"                add_header WWW-Authenticate '{challenge}' always;\n"
        "                return 401;\n            }\n"
        "            if ($refused = 2) {\n"
        f"                add_header WWW-Authenticate '{expiry}' always;\n"
        "                return 401;\n            }\n"
        if token
        else ""
    )
    servers = []
    for route in routes:
        origin = urlsplit(route.upstream)
        servers.append(
            f"    upstream {route.name} {{\n        server {origin.hostname}:{origin.port};\n"
            f"        keepalive 16;\n    }}\n"
            f"    server {{\n        listen 127.0.0.1:{route.port} ssl;\n"
            f"        ssl_certificate {server.cert};\n        ssl_certificate_key {server.key};\n"
            f"{verify}        location / {{\n{refuse}"
            f"            proxy_pass http://{route.name};\n"
            "            proxy_http_version 1.1;\n"
            '            proxy_set_header Connection "";\n'
            "            proxy_read_timeout 600s;\n"
            "        }\n    }\n"
        )
    return (
        f"{user}worker_processes 1;\npid {directory / 'nginx.pid'};\n"
        f"error_log {directory / 'error.log'} info;\n"
        "events { worker_connections 512; }\n"
        "http {\n"
        "    log_format seen '$request_method $uri $status $connection $connection_requests "
        "$gzip_ratio';\n"
        f"    access_log {directory / 'access.log'} seen;\n{temporary}\n"
        "    keepalive_timeout 65s;\n"
        "    gzip on;\n    gzip_types application/json;\n    gzip_min_length 1;\n"
        f"{auth}" + "".join(servers) + "}\n"
    )


@dataclass(frozen=True)
class Served:
    """One line of the ingress's access log."""

    method: str
    path: str
    status: int
    connection: int
    requests_on_connection: int
    gzipped: bool


@dataclass
class Ingress:
    routes: dict[str, Route]
    directory: Path

    def url(self, name: str) -> str:
        return self.routes[name].url

    def log(self, name: str = "error.log") -> str:
        path = self.directory / name
        return path.read_text(errors="replace") if path.exists() else ""

    def served(self) -> list[Served]:
        found = []
        for line in self.log("access.log").splitlines():
            method, path, status, connection, count, ratio = line.split()
            found.append(
                Served(method, path, int(status), int(connection), int(count), ratio != "-")
            )
        return found


@contextmanager
def ingress(
    binary: str,
    directory: Path,
    upstreams: dict[str, str],
    server: Pair,
    *,
    client_ca: Path | None = None,
    token: str | None = None,
    expired_token: str | None = None,
) -> Iterator[Ingress]:
    """nginx (`binary`: the `nginx` fixture) in front of each upstream URL (by name), until the
    block ends."""
    directory.mkdir(parents=True, exist_ok=True)
    routes = {name: Route(name, url, free_port()) for name, url in upstreams.items()}
    conf = directory / "nginx.conf"
    conf.write_text(
        configuration(
            directory,
            list(routes.values()),
            server,
            client_ca=client_ca,
            token=token,
            expired_token=expired_token,
        )
    )
    command = [binary, "-p", str(directory), "-c", str(conf), "-e", str(directory / "error.log")]
    command += ["-g", "daemon off;"]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        _wait_listening(process, list(routes.values()))
        yield Ingress(routes, directory)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGQUIT)  # graceful: workers finish and exit
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)


def _wait_listening(process: subprocess.Popen[bytes], routes: list[Route]) -> None:
    deadline = time.monotonic() + READY_S
    waiting = list(routes)
    while waiting:
        if process.poll() is not None:
            raise RuntimeError(
                f"nginx exited with {process.returncode}: {process.stderr.read().decode()[-2000:]}"
                if process.stderr
                else f"nginx exited with {process.returncode}"
            )
        try:
            with socket.create_connection(("127.0.0.1", waiting[0].port), timeout=0.5):
                waiting.pop(0)
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nginx did not listen on {waiting[0].port} in time") from None
            time.sleep(0.05)
