"""A fake Docker Engine API on a UNIX socket, for testing `DockerLauncher` where no engine runs.

It answers the endpoints the `docker` SDK calls to pull and inspect images, create and remove
networks, and create, start, inspect, read the logs of, wait for, stop, list and remove
containers, with the JSON shapes of Engine API 1.45. It records every call (`engine.calls`) so a
test can assert exactly what the launcher asked for, and containers follow a script
(`engine.script(...)`): log lines, an exit after a delay, the host ports their published ports
land on. Nothing runs inside a "container"; a test that needs the deployment to answer HTTP
points a published port at a real server it started (`stub_frontend.StubFrontend`). What the
engine keeps (calls, scripts, containers) is in `fake_docker_objects`.

An exception inside a handler answers 500 and is kept in `engine.errors`; `stop()` re-raises the
first one, so a bug in the fake never passes for a launcher failure.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import socketserver
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .fake_docker_objects import (
    Call,
    ContainerScript,
    EngineError,
    FakeContainer,
    digest,
    iso,
    matches_filters,
    normal_ref,
    split_ref,
)

API_VERSION = "1.45"

ENGINE_VERSION = "26.1.4"

_VERSIONED = re.compile(r"^/v\d+\.\d+(/.*)$")


class FakeDockerEngine:
    """The engine's state, its recorded calls, and the server that exposes both."""

    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="fake-docker-"))
        self.socket_path = self._dir / "docker.sock"
        self.calls: list[Call] = []
        self.errors: list[BaseException] = []
        self.images: dict[str, dict[str, Any]] = {}
        self.pullable: dict[str, dict[str, Any]] = {}
        self.containers: dict[str, FakeContainer] = {}
        self.networks: dict[str, dict[str, Any]] = {}
        self._scripts: dict[str, ContainerScript] = {}
        self._lock = threading.RLock()
        self._ports = itertools.count(49153)
        self._ids = itertools.count(1)
        self._server: _UnixHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- what a test sets up ------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"unix://{self.socket_path}"

    def add_image(self, ref: str, *, local: bool = True, cmd: list[str] | None = None) -> str:
        """An image present on the host (`local`), or one `POST /images/create` can pull."""
        key = normal_ref(ref)
        repo, _ = split_ref(ref)
        image_id = "sha256:" + digest("image " + key)
        with self._lock:
            record = {
                "Id": image_id,
                "RepoTags": [key],
                "RepoDigests": [f"{repo}@sha256:{digest('manifest ' + key)}"],
                "Created": "2026-01-02T03:04:05Z",
                "Size": 1234567,
                "Architecture": "amd64",
                "Os": "linux",
                "Config": {"Cmd": cmd or ["/bin/bash"], "Env": ["PATH=/usr/bin"], "Labels": {}},
            }
            if local:
                self.images[key] = record
            else:
                self.pullable[key] = record
        return image_id

    def add_container(
        self, name: str, image: str, labels: dict[str, str], *, running: bool = True
    ) -> str:
        """A container that exists before the test (someone else's)."""
        with self._lock:
            container = FakeContainer(
                id=self._new_id(),
                name=name,
                image=image,
                image_id="sha256:" + digest("image " + normal_ref(image)),
                body={"Image": image, "Cmd": ["sleep", "infinity"], "HostConfig": {}},
                labels=dict(labels),
                script=ContainerScript(),
            )
            if running:
                container.started_at = time.time()
            self.containers[container.id] = container
            return container.id

    def add_network(self, name: str, labels: dict[str, str] | None = None) -> str:
        with self._lock:
            return self._create_network({"Name": name, "Driver": "bridge", "Labels": labels or {}})

    def script(self, name_suffix: str, script: ContainerScript) -> None:
        """How containers whose name ends with `-<name_suffix>` behave once started."""
        with self._lock:
            self._scripts[name_suffix] = script

    def calls_to(self, method: str, pattern: str) -> list[Call]:
        """Recorded calls with this method whose path matches the regular expression."""
        with self._lock:
            return [c for c in self.calls if c.method == method and re.fullmatch(pattern, c.path)]

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> FakeDockerEngine:
        self._server = _UnixHTTPServer(str(self.socket_path), _Handler)
        self._server.engine = self
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-docker-engine",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        shutil.rmtree(self._dir, ignore_errors=True)
        if self.errors:
            raise AssertionError(f"the fake engine failed: {self.errors[0]!r}") from self.errors[0]

    def __enter__(self) -> FakeDockerEngine:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- the API --------------------------------------------------------------------------------

    def handle(self, call: Call) -> tuple[int, Any]:
        """(status, JSON body | bytes | None | iterator of JSON objects) for one call."""
        with self._lock:
            self.calls.append(call)
            for pattern, method_name in _ROUTES.get(call.method, ()):
                match = re.fullmatch(pattern, call.path)
                if match:
                    result: tuple[int, Any] = getattr(self, method_name)(call, *match.groups())
                    return result
        raise EngineError(404, f"page not found: {call.method} {call.path}")

    def _version(self, call: Call) -> tuple[int, Any]:
        return 200, {
            "Version": ENGINE_VERSION,
            "ApiVersion": API_VERSION,
            "MinAPIVersion": "1.24",
            "GitCommit": "de5c9cf",
            "GoVersion": "go1.21.11",
            "Os": "linux",
            "Arch": "amd64",
            "KernelVersion": "6.8.0",
            "Components": [{"Name": "Engine", "Version": ENGINE_VERSION, "Details": {}}],
        }

    def _ping(self, call: Call) -> tuple[int, Any]:
        return 200, b"OK"

    def _image_inspect(self, call: Call, name: str) -> tuple[int, Any]:
        record = self.images.get(normal_ref(unquote(name)))
        if record is None:
            raise EngineError(404, f"No such image: {unquote(name)}")
        return 200, record

    def _image_pull(self, call: Call) -> tuple[int, Any]:
        repo = call.param("fromImage") or ""
        tag = call.param("tag") or "latest"
        key = normal_ref(f"{repo}@{tag}" if tag.startswith("sha256:") else f"{repo}:{tag}")
        if key not in self.pullable:
            raise EngineError(
                404,
                f"pull access denied for {repo}, repository does not exist or may require "
                "'docker login'",
            )
        record = self.pullable[key]
        self.images[key] = record
        digest = record["RepoDigests"][0].split("@", 1)[1]
        return 200, iter(
            [
                {"status": f"Pulling from {repo}", "id": tag},
                {"status": "Pulling fs layer", "progressDetail": {}, "id": "a1b2c3d4e5f6"},
                {"status": "Pull complete", "progressDetail": {}, "id": "a1b2c3d4e5f6"},
                {"status": f"Digest: {digest}"},
                {"status": f"Status: Downloaded newer image for {key}"},
            ]
        )

    def _network_create(self, call: Call) -> tuple[int, Any]:
        body = call.body or {}
        if any(n["Name"] == body.get("Name") for n in self.networks.values()):
            raise EngineError(409, f"network with name {body.get('Name')} already exists")
        return 201, {"Id": self._create_network(body), "Warning": ""}

    def _create_network(self, body: dict[str, Any]) -> str:
        network_id = digest(f"network {next(self._ids)}")
        self.networks[network_id] = {
            "Name": body.get("Name"),
            "Id": network_id,
            "Created": iso(time.time()),
            "Scope": "local",
            "Driver": body.get("Driver") or "bridge",
            "EnableIPv6": False,
            "IPAM": {"Driver": "default", "Options": None, "Config": []},
            "Internal": bool(body.get("Internal")),
            "Attachable": bool(body.get("Attachable")),
            "Ingress": False,
            "Containers": {},
            "Options": body.get("Options") or {},
            "Labels": body.get("Labels") or {},
        }
        return network_id

    def _find_network(self, ref: str) -> dict[str, Any]:
        for network in self.networks.values():
            if ref in (network["Id"], network["Name"]) or network["Id"].startswith(ref):
                return network
        raise EngineError(404, f"network {ref} not found")

    def _network_inspect(self, call: Call, ref: str) -> tuple[int, Any]:
        return 200, self._find_network(ref)

    def _network_list(self, call: Call) -> tuple[int, Any]:
        filters = call.filters()
        return 200, [
            n for n in self.networks.values() if matches_filters(filters, n["Name"], n["Labels"])
        ]

    def _network_remove(self, call: Call, ref: str) -> tuple[int, Any]:
        network = self._find_network(ref)
        attached = [
            c.name
            for c in self.containers.values()
            if network["Name"] in c.networks() or network["Id"] in c.networks()
        ]
        if attached:
            raise EngineError(
                403,
                f"error while removing network: network {network['Name']} id "
                f"{network['Id']} has active endpoints ({', '.join(attached)})",
            )
        del self.networks[network["Id"]]
        return 204, None

    def _container_create(self, call: Call) -> tuple[int, Any]:
        body = call.body or {}
        name = call.param("name") or f"fake_{next(self._ids)}"
        for existing in self.containers.values():
            if existing.name == name:
                raise EngineError(
                    409,
                    f'Conflict. The container name "/{name}" is already in use by container '
                    f'"{existing.id}". You have to remove (or rename) that container to be able '
                    "to reuse that name.",
                )
        image = self.images.get(normal_ref(body.get("Image", "")))
        if image is None:
            raise EngineError(404, f"No such image: {body.get('Image')}")
        mode = (body.get("HostConfig") or {}).get("NetworkMode") or "default"
        if mode not in ("default", "bridge", "host", "none") and not mode.startswith("container:"):
            self._find_network(mode)
        script = next(
            (s for suffix, s in self._scripts.items() if name.endswith("-" + suffix)),
            ContainerScript(),
        )
        container = FakeContainer(
            id=self._new_id(),
            name=name,
            image=body["Image"],
            image_id=image["Id"],
            body=body,
            labels=dict(body.get("Labels") or {}),
            script=script,
        )
        self.containers[container.id] = container
        return 201, {"Id": container.id, "Warnings": []}

    def _find_container(self, ref: str) -> FakeContainer:
        for container in self.containers.values():
            if ref in (container.id, container.name) or container.id.startswith(ref):
                return container
        raise EngineError(404, f"No such container: {ref}")

    def _container_start(self, call: Call, ref: str) -> tuple[int, Any]:
        container = self._find_container(ref)
        if container.status() == "running":
            return 304, None
        container.started_at = time.time()
        container.stopped_code = None
        bindings = (container.body.get("HostConfig") or {}).get("PortBindings") or {}
        container.ports = {}
        for port, entries in bindings.items():
            number = int(port.split("/", 1)[0])
            published = []
            for entry in entries:
                host_port = container.script.host_ports.get(number)
                chosen = host_port or (int(entry["HostPort"]) if entry.get("HostPort") else None)
                published.append(
                    {
                        "HostIp": entry.get("HostIp") or "0.0.0.0",
                        "HostPort": str(chosen or next(self._ports)),
                    }
                )
            container.ports[port] = published
        return 204, None

    def _container_inspect(self, call: Call, ref: str) -> tuple[int, Any]:
        return 200, self._find_container(ref).inspect()

    def _container_logs(self, call: Call, ref: str) -> tuple[int, Any]:
        return 200, self._find_container(ref).log_frames(call.param("tail"))

    def _container_stop(self, call: Call, ref: str) -> tuple[int, Any]:
        container = self._find_container(ref)
        if container.status() != "running":
            return 304, None
        container.stopped_code = 143
        return 204, None

    def _container_wait(self, call: Call, ref: str) -> tuple[int, Any]:
        container = self._find_container(ref)
        deadline = time.time() + 30
        while container.exit_code() is None and time.time() < deadline:
            self._lock.release()
            try:
                time.sleep(0.05)
            finally:
                self._lock.acquire()
        return 200, {"StatusCode": container.exit_code(), "Error": None}

    def _container_remove(self, call: Call, ref: str) -> tuple[int, Any]:
        container = self._find_container(ref)
        if container.status() == "running" and call.param("force") not in ("1", "True", "true"):
            raise EngineError(
                409,
                f'cannot remove container "/{container.name}": container is running: '
                "stop the container before removing or force remove",
            )
        del self.containers[container.id]
        return 204, None

    def _container_list(self, call: Call) -> tuple[int, Any]:
        filters = call.filters()
        everything = call.param("all") in ("1", "True", "true")
        return 200, [
            c.summary()
            for c in self.containers.values()
            if (everything or c.status() == "running")
            and matches_filters(filters, c.name, c.labels)
        ]

    def _new_id(self) -> str:
        return digest(f"container {next(self._ids)}")


_ROUTES: dict[str, tuple[tuple[str, str], ...]] = {
    "GET": (
        (r"/version", "_version"),
        (r"/_ping", "_ping"),
        (r"/images/(.+)/json", "_image_inspect"),
        (r"/networks", "_network_list"),
        (r"/networks/([^/]+)", "_network_inspect"),
        (r"/containers/json", "_container_list"),
        (r"/containers/([^/]+)/json", "_container_inspect"),
        (r"/containers/([^/]+)/logs", "_container_logs"),
    ),
    "HEAD": ((r"/_ping", "_ping"),),
    "POST": (
        (r"/images/create", "_image_pull"),
        (r"/networks/create", "_network_create"),
        (r"/containers/create", "_container_create"),
        (r"/containers/([^/]+)/start", "_container_start"),
        (r"/containers/([^/]+)/stop", "_container_stop"),
        (r"/containers/([^/]+)/wait", "_container_wait"),
    ),
    "DELETE": (
        (r"/networks/([^/]+)", "_network_remove"),
        (r"/containers/([^/]+)", "_container_remove"),
    ),
}


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    engine: FakeDockerEngine


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 with `Connection: close`: each request gets its own connection, so bodies of
    unknown length (the chunked pull progress) need no keep-alive bookkeeping."""

    protocol_version = "HTTP/1.1"
    server: _UnixHTTPServer

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _dispatch(self, method: str) -> None:
        engine = self.server.engine
        split = urlsplit(self.path)
        versioned = _VERSIONED.match(split.path)
        path = versioned.group(1) if versioned else split.path
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        call = Call(method, path, parse_qs(split.query), body)
        try:
            status, payload = engine.handle(call)
        except EngineError as exc:
            self._send(exc.status, {"message": exc.message})
            return
        except Exception as exc:  # kept for the test: a broken fake must not look like a pass
            engine.errors.append(exc)
            self._send(500, {"message": f"fake engine error: {exc!r}"})
            return
        if isinstance(payload, Iterator):
            self._send_chunked(status, payload)
        else:
            self._send(status, payload)

    def _send(self, status: int, payload: Any) -> None:
        if payload is None:
            data, kind = b"", "text/plain"
        elif isinstance(payload, bytes):
            data, kind = payload, "application/vnd.docker.multiplexed-stream"
        else:
            data, kind = json.dumps(payload).encode(), "application/json"
        self.send_response(status)
        self.send_header("Api-Version", API_VERSION)
        self.send_header("Content-Type", kind)
        if status not in (204, 304):
            self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        if status not in (204, 304) and self.command != "HEAD":
            self.wfile.write(data)

    def _send_chunked(self, status: int, events: Iterator[Any]) -> None:
        self.send_response(status)
        self.send_header("Api-Version", API_VERSION)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        for event in events:
            data = (json.dumps(event) + "\r\n").encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")
