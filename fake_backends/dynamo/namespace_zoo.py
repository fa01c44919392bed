"""``python -m fake_backends.dynamo.namespace_zoo --namespace NS ...``: one REAL Dynamo 1.6.1
process whose RL endpoint is registered under many namespaces at once.

Why: the RL listener's namespace scope is decided by the real listener's code, and the only way
to know it is to ask the real listener about workers in many namespaces. One process serving
``dyn://<ns>.backend.rl`` for every ``--namespace`` is a whole fleet of namespaces for the price
of one worker, so a differential test can restart only the frontend (under each environment it
generates) and compare what the listener lists with the oracle.

Every endpoint answers the RL route probe with one route (``liveness_probe``) on the process's
system server; nothing generates. Run with the Dynamo environment's interpreter and
``PYTHONPATH`` at the repository root, like ``fake_backends.dynamo.worker``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

from fake_backends.dynamo.connect import distributed_runtime

log = logging.getLogger("fake_backends.dynamo.namespace_zoo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fake_backends.dynamo.namespace_zoo",
        description="Register one RL endpoint per --namespace in a real Dynamo runtime.",
    )
    parser.add_argument("--namespace", action="append", default=[], required=True)
    return parser


async def serve(namespaces: Sequence[str]) -> None:
    from dynamo.common.rl import (  # type: ignore[import-not-found]
        RLRouteRegistry,
        register_rl_routes,
    )

    loop = asyncio.get_running_loop()
    runtime = distributed_runtime()
    registry = RLRouteRegistry(runtime, world_size=1)

    async def liveness(body: dict[str, Any]) -> dict[str, Any]:
        return {"status": "ok", "alive": True}

    register_rl_routes(runtime, registry, {"liveness_probe": liveness}, enable_dispatch=True)
    endpoints = [runtime.endpoint(f"{namespace}.backend.rl") for namespace in namespaces]
    stopping: list[asyncio.Task[None]] = []

    async def shut_down() -> None:
        for endpoint in endpoints:
            with contextlib.suppress(Exception):
                await endpoint.unregister_endpoint_instance()
        runtime.shutdown()

    def on_signal() -> None:
        if not stopping:
            stopping.append(loop.create_task(shut_down()))

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    log.info("serving the rl endpoint in %d namespaces", len(endpoints))
    await asyncio.gather(
        *(endpoint.serve_endpoint(registry.dispatch_stream) for endpoint in endpoints)
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    asyncio.run(serve(args.namespace))
    return 0


if __name__ == "__main__":
    sys.exit(main())
