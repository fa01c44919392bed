"""A loopback HTTP server standing in for a frontend container (`StubFrontend`): a published port
of a fake Docker container (`fake_docker_engine`) is pointed at it when a test needs the
deployment to answer HTTP."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class StubFrontend:
    """A loopback HTTP server standing in for what the frontend container would serve:
    `/v1/models` (and the RL listener's `/v1/rl/workers`) list the model and a worker once
    `ready` is true and `ready_after` earlier requests to that path were answered empty.
    `on_request(path)` runs before each answer (to change the world mid-launch)."""

    def __init__(self, model: str = "toy", *, ready: bool = True, ready_after: int = 0) -> None:
        self.model = model
        self.ready = ready
        self.ready_after = ready_after
        self.requests: list[str] = []
        self.on_request: Callable[[str], None] | None = None
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                stub.requests.append(self.path)
                if stub.on_request is not None:
                    stub.on_request(self.path)
                count = sum(1 for p in stub.requests if p == self.path)
                up = stub.ready and count > stub.ready_after
                payload: dict[str, Any]
                if self.path == "/v1/models":
                    listed = [{"id": stub.model, "object": "model", "owned_by": "nvidia"}]
                    payload = {"object": "list", "data": listed if up else []}
                    status = 200
                elif self.path == "/v1/rl/workers":
                    worker = {
                        "namespace": "dynamo",
                        "component": "backend",
                        "endpoint": "rl",
                        "instance_id": 1,
                        "routes": ["liveness_probe"],
                    }
                    payload = {
                        "protocol_version": 1,
                        "namespace": "dynamo",
                        "workers": [worker] if up else [],
                    }
                    status = 200
                else:
                    payload, status = {"error": "not found"}, 404
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> StubFrontend:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
