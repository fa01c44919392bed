"""One fake Dynamo deployment: frontend, RL listener, control port, worker system servers.

``Assembly`` binds every socket and builds every app (shared by the CLI and the
in-process API); ``FakeDeployment`` runs an assembly in a background thread with its own
event loop, for tests that want a live deployment inside the test process.

Both take the deployment's options validated (``options.DeploymentOptions``), before any socket
is bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fake_backends.admin.routes import AdminRoutes
from fake_backends.admin.sglang import sglang_routes
from fake_backends.admin.system_server import build_worker_admin_app
from fake_backends.admin.trtllm import trtllm_routes
from fake_backends.admin.vllm import python_routes
from fake_backends.admin.vllm_sidecar import sidecar_routes
from fake_backends.deployment.control_port import build_control_app
from fake_backends.deployment.credentials import RequiredCredentials
from fake_backends.deployment.ingress import CompressingIngress
from fake_backends.deployment.options import DeploymentOptions
from fake_backends.deployment.serving import (
    Listener,
    ServerGroup,
    advertised_host,
    bind_socket,
    socket_url,
)
from fake_backends.discovery.listener import (
    ALL_METHODS,
    WORKERS_PATH,
    build_rl_app,
    list_workers,
)
from fake_backends.encoding.replies import json_response
from fake_backends.faults.deployment import active_faults
from fake_backends.frontend.app import build_frontend_app
from fake_backends.runtime.admin_ledger import AdminRecord
from fake_backends.runtime.personalities import get_personality
from fake_backends.runtime.request_ledger import RequestRecord
from fake_backends.runtime.scheduler import WorkerRuntime
from fake_backends.runtime.state import DeploymentState
from fake_backends.runtime.workers import (
    GENERATE_ENDPOINT,
    RL_ENDPOINT,
    EngineWorker,
    instance_id_for,
)

CONTROL_HOST = "127.0.0.1"
START_TIMEOUT_SECONDS = 15.0


class Assembly:
    """Bound sockets + apps + shared state of one deployment (nothing is served yet)."""

    def __init__(
        self,
        options: DeploymentOptions,
        *,
        faults: Iterable[str] = (),
        host: str = "127.0.0.1",
        port: int = 0,
        rl_port: int = 0,
        control_port: int = 0,
        listener_env: Mapping[str, str] | None = None,
        credentials: RequiredCredentials | None = None,
    ) -> None:
        """``options``: the validated deployment (`options.DeploymentOptions.build`)."""
        personality = get_personality(options.backend)
        active = active_faults(faults)
        listeners: list[Listener] = []
        try:
            frontend_sock = bind_socket(host, port)
            listeners.append(Listener("frontend", _placeholder_app, frontend_sock))
            rl_sock = bind_socket(host, rl_port)
            listeners.append(Listener("rl", _placeholder_app, rl_sock))
            control_sock = bind_socket(CONTROL_HOST, control_port)
            listeners.append(Listener("control", _placeholder_app, control_sock))
            engine_workers: list[EngineWorker] = []
            now = time.monotonic()
            shown = advertised_host(host)
            frontend_port = frontend_sock.getsockname()[1]
            for index in range(options.workers):
                worker = EngineWorker(
                    index,
                    instance_id_for(index),
                    options.model,
                    weights_tag=options.initial_weights,
                    initial_weights=options.initial_weights,
                    started_at=now,
                    namespace=options.namespace_of(index),
                    runtime=WorkerRuntime(active, first=index == 0),
                    unpaused_update_status=options.unpaused_update_status,
                )
                worker.transport_address = f"{shown}:{frontend_port}"
                if personality.system_servers:
                    sock = bind_socket(host, 0)
                    worker.system_url = socket_url(sock, host)
                    worker.transport_address = f"{shown}:{sock.getsockname()[1]}"
                    listeners.append(Listener(f"system-{index}", _placeholder_app, sock))
                engine_workers.append(worker)
        except BaseException:
            ServerGroup(listeners).close_sockets()
            raise
        self.backend = personality.name
        self.options = options
        self.state = DeploymentState(
            personality,
            options.model,
            engine_workers,
            faults=active,
            admin_family=options.admin_family,
            listener_env_override=None if listener_env is None else dict(listener_env),
            listing_order=options.listing_order,
            vocabulary=options.vocabulary,
            admin_base_urls=options.admin_base_urls,
            dynamo_release=options.dynamo_release,
            migration_limit=options.migration_limit,
        )
        self.frontend_url = socket_url(frontend_sock, host)
        self.rl_url = socket_url(rl_sock, host)
        self.control_url = socket_url(control_sock, CONTROL_HOST)
        listeners[0].app = build_frontend_app(self.state, [_leaked_listener(self.state)])
        if options.ingress_coding != "identity":
            listeners[0].app = CompressingIngress(listeners[0].app, options.ingress_coding)
        listeners[1].app = build_rl_app(self.state)
        listeners[2].app = build_control_app(self.state)
        for listener, worker in zip(listeners[3:], engine_workers, strict=False):
            routes = self._admin_routes()
            if personality.rl_workers:
                worker.advertised_routes = routes.advertised()
                endpoints: tuple[str, ...] = (RL_ENDPOINT, GENERATE_ENDPOINT)
            else:
                endpoints = (GENERATE_ENDPOINT,)
            listener.app = build_worker_admin_app(
                worker, self.state.admin_ledger, routes, endpoints, options.engine_call_delay_s
            )
        for listener in listeners if credentials is not None else ():
            listener.app = credentials.guard(listener.name, listener.app)
        self.group = ServerGroup(listeners)

    def _admin_routes(self) -> AdminRoutes:
        """A fresh route table for one worker of this deployment's backend and family."""
        if not self.state.personality.admin_routes:
            return AdminRoutes()
        if self.backend == "trtllm":
            return trtllm_routes()
        if self.backend == "sglang":
            return sglang_routes(self.options.engine_routes)
        if self.options.admin_family == "sidecar":
            return sidecar_routes()
        return python_routes()

    def workers_info(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for worker in self.state.workers:
            info: dict[str, Any] = {"instance_id": worker.instance_id}
            if worker.system_url is not None:
                info["system_url"] = worker.system_url
            info["namespace"] = worker.namespace
            out.append(info)
        return out

    def ready_info(self) -> dict[str, Any]:
        """The fields of the ready line."""
        return {
            "backend": self.backend,
            "frontend": self.frontend_url,
            "rl": self.rl_url,
            "control": self.control_url,
            "model": self.state.model_name,
            "workers": self.workers_info(),
            "faults": list(self.state.faults.names),
            "pid": os.getpid(),
        }


def _leaked_listener(state: DeploymentState) -> Route:
    """``/v1/rl/workers`` on the frontend port: 404 like any unknown path (it is the RL
    listener's), except under the ``rl_listener_on_frontend`` fault, which serves the
    listener's body there too."""

    async def rl_workers(request: Request) -> Response:
        leaked = state.personality.rl_workers and state.faults.active("rl_listener_on_frontend")
        if leaked and request.method == "GET":
            return json_response(await list_workers(state))
        raise HTTPException(404)

    return Route(WORKERS_PATH, rl_workers, methods=ALL_METHODS)


async def _placeholder_app(scope: Any, receive: Any, send: Any) -> None:  # pragma: no cover
    raise RuntimeError("listener app was not built")


class FakeDeployment:
    """A fake Dynamo deployment served from a background thread.

    Use as a context manager: the servers listen on entry (ports are ephemeral unless
    given) and are closed on exit.
    """

    def __init__(
        self,
        backend: str = "vllm",
        *,
        faults: Iterable[str] = (),
        host: str = "127.0.0.1",
        port: int = 0,
        rl_port: int = 0,
        control_port: int = 0,
        listener_env: Mapping[str, str] | None = None,
        credentials: RequiredCredentials | None = None,
        **options: Any,
    ) -> None:
        """See ``Assembly``; ``options``: the deployment's, by name (``options.OPTIONS``: e.g.
        ``workers``, ``admin_family``, ``listing_order``, ``migration_limit``).
        ``listener_env`` None: the RL listener reads ``os.environ``. ``credentials``: what each
        plane requires of every request (``credentials.RequiredCredentials``; None: nothing).
        Configuration errors raise ValueError here, before any socket is bound (an unknown
        option TypeError).
        """
        self.options = DeploymentOptions.build(backend, **options)
        active_faults(faults)  # validate now, before any socket is bound
        self._sockets: dict[str, Any] = {
            "faults": tuple(faults),
            "host": host,
            "port": port,
            "rl_port": rl_port,
            "control_port": control_port,
            "listener_env": None if listener_env is None else dict(listener_env),
            "credentials": credentials,
        }
        self.backend = backend
        self._assembly: Assembly | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> FakeDeployment:
        if self._thread is not None:
            raise RuntimeError("deployment already started")
        self._assembly = Assembly(self.options, **self._sockets)
        self._thread = threading.Thread(
            target=self._thread_main, name=f"fake-{self.backend}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_SECONDS):
            self.stop()
            raise RuntimeError("fake deployment did not start in time")
        if self._error is not None:
            self.stop()
            raise RuntimeError("fake deployment failed to start") from self._error
        return self

    def stop(self) -> None:
        loop, stop, thread = self._loop, self._stop, self._thread
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(stop.set)
        if thread is not None:
            thread.join(timeout=10)
        if self._assembly is not None:
            self._assembly.group.close_sockets()
        self._thread = None

    def __enter__(self) -> FakeDeployment:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported to start(); nothing else can see it
            self._error = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        assert self._assembly is not None
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        await self._assembly.group.serve(self._stop, on_ready=self._ready.set)

    # -- what a test needs ----------------------------------------------------------

    @property
    def assembly(self) -> Assembly:
        if self._assembly is None:
            raise RuntimeError("deployment not started")
        return self._assembly

    @property
    def state(self) -> DeploymentState:
        return self.assembly.state

    @property
    def frontend_url(self) -> str:
        return self.assembly.frontend_url

    @property
    def rl_url(self) -> str:
        return self.assembly.rl_url

    @property
    def control_url(self) -> str:
        return self.assembly.control_url

    @property
    def model(self) -> str:
        return self.options.model

    @property
    def workers(self) -> list[dict[str, Any]]:
        return self.assembly.workers_info()

    @property
    def faults(self) -> tuple[str, ...]:
        return self.assembly.state.faults.names

    def set_faults(self, names: Iterable[str]) -> tuple[str, ...]:
        """Replace the active faults (validated as a whole); returns the active list."""
        return self.assembly.state.faults.set(names)

    @property
    def admin_ledger(self) -> list[AdminRecord]:
        """Every /engine request to any worker, oldest first."""
        return self.assembly.state.admin_ledger.entries()

    @property
    def request_ledger(self) -> list[RequestRecord]:
        """Every generation attempt (snapshots), oldest first."""
        return self.assembly.state.request_ledger.entries()

    def clear_request_ledger(self) -> None:
        self.assembly.state.request_ledger.clear()

    def set_listener_env(self, env: Mapping[str, str] | None) -> None:
        """Change the RL listener's environment at run time (None: ``os.environ``)."""
        self.assembly.state.set_listener_env(env)

    def ready_info(self) -> dict[str, Any]:
        return self.assembly.ready_info()
