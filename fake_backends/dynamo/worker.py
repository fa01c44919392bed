"""``python -m fake_backends.dynamo.worker``: the toy model as a REAL Dynamo 1.6.1 backend worker.

Why: the suite must test the real Dynamo frontend, router, nvext assembly and RL listener,
and for that it needs an engine behind them whose every number it can recompute and that it
can tell to misbehave.  This worker registers the toy model (``fake_backends.dynamo.engine``)
through Dynamo's own Python runtime the way the vLLM worker does, so everything between the
client and the engine is Dynamo's code:

* ``dyn://<namespace>.backend.generate`` serves the token stream, registered with
  ``register_model(ModelInput.Tokens, Chat | Completions, ...)`` from ``--model-dir`` (written
  by ``python -m fake_backends.model.directory``), context length 4096, and the engine-specific
  flags that enable the frontend's SGLang ``/generate`` and vLLM ``/inference/v1/generate``;
* ``dyn://<namespace>.backend.rl`` serves ``RLRouteRegistry.dispatch_stream``, and the vLLM
  worker's RL routes are registered with ``register_rl_routes(..., enable_dispatch=True)``,
  so they answer at ``/engine/<route>`` on ``DYN_SYSTEM_PORT`` and ``/v1/rl/workers`` lists
  them;
* SIGTERM/SIGINT: held requests are released, both endpoints leave discovery, the runtime
  shuts down, exit 0.

Run it with the Dynamo environment's interpreter and ``PYTHONPATH`` at the repository root
(see ``rl_conformance/launchers/dynamo.py``).  Only the standard library and fake_backends'
pure modules are imported at module level; Dynamo is imported when serving starts, so
``--list-engine-faults`` and argument errors work anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from fake_backends.dynamo.connect import distributed_runtime
from fake_backends.dynamo.engine import ADMIN_FAMILIES, RouteCallback, ToyEngine
from fake_backends.dynamo.requests import Json, RequestContext
from fake_backends.faults.catalogue import ActiveFaults, UnknownFaultError
from fake_backends.faults.engine import catalogue_lines, engine_faults

SHUTDOWN_DRAIN_S = 5.0
"""How long a stopping worker waits for the requests it released to be answered."""

log = logging.getLogger("fake_backends.dynamo.worker")

DEFAULT_CONTEXT_LENGTH = 4096
MAX_NUM_SEQS = 64
KV_CACHE_BLOCK_SIZE = 16
DEFAULT_TOKEN_INTERVAL_MS = 4.0
LOG_REQUESTS_ENV = "FAKE_BACKENDS_DYNAMO_LOG_REQUESTS"  # same as --log-requests (launcher-proof)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fake_backends.dynamo.worker",
        description="Serve the fake_backends toy model as a real Dynamo backend worker "
        "(token input, chat + completions, vLLM-style RL admin routes).",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        help="model directory from `python -m fake_backends.model.directory`",
    )
    parser.add_argument("--model-name", default="toy", help="served model name (default toy)")
    parser.add_argument(
        "--namespace", default="dynamo", help="Dynamo namespace of the endpoints (default dynamo)"
    )
    parser.add_argument(
        "--context-length",
        type=int,
        default=DEFAULT_CONTEXT_LENGTH,
        help=f"runtime_config.context_length (default {DEFAULT_CONTEXT_LENGTH})",
    )
    parser.add_argument(
        "--admin-family",
        choices=ADMIN_FAMILIES,
        default="vllm",
        help="vllm: the vLLM Python worker's RL routes, listed by /v1/rl/workers (default); "
        "sglang: SGLang's /engine routes, not listed (reached by the worker's system URL), the "
        "worker leaving and rejoining routing with the engine's pause state",
    )
    parser.add_argument(
        "--token-interval-ms",
        type=float,
        default=DEFAULT_TOKEN_INTERVAL_MS,
        metavar="MS",
        help="time between two tokens of a request (default "
        f"{DEFAULT_TOKEN_INTERVAL_MS:g}: the pace of a small model on a CPU, so a control call "
        "sent once a long stream started lands while it runs; 0: as fast as possible)",
    )
    parser.add_argument(
        "--engine-fault",
        action="append",
        default=[],
        metavar="NAME",
        help="make the engine deviate in a named way (repeatable); see --list-engine-faults",
    )
    parser.add_argument(
        "--list-engine-faults",
        action="store_true",
        help="print NAME<TAB>description lines and exit",
    )
    parser.add_argument(
        "--log-requests",
        action="store_true",
        help="log every preprocessed request the frontend sends ('request <id> <json>' lines); "
        f"also switched on by {LOG_REQUESTS_ENV}=1",
    )
    return parser


def _request_logger(engine: ToyEngine) -> Any:
    """``engine.generate`` that first logs the request exactly as the frontend sent it."""

    async def generate(request: Json, context: RequestContext) -> AsyncIterator[Json]:
        request_id = context.id() if context is not None else "-"
        log.info("request %s %s", request_id, json.dumps(request, sort_keys=True, default=str))
        async for chunk in engine.generate(request, context):
            yield chunk

    return generate


async def serve(args: argparse.Namespace, faults: ActiveFaults) -> None:
    """Register the endpoints and serve until SIGTERM/SIGINT."""
    # Only the Dynamo environment has these (mypy runs in ours, hence the ignores).
    from dynamo.common.rl import (  # type: ignore[import-not-found]
        RLRouteRegistry,
        register_rl_routes,
    )
    from dynamo.llm import (  # type: ignore[import-not-found]
        ModelInput,
        ModelRuntimeConfig,
        ModelType,
        WorkerType,
        register_model,
    )

    loop = asyncio.get_running_loop()
    runtime = distributed_runtime()
    engine = ToyEngine(
        faults, admin_family=args.admin_family, token_interval_s=args.token_interval_ms / 1000
    )
    generate_endpoint = runtime.endpoint(f"{args.namespace}.backend.generate")
    rl_endpoint = runtime.endpoint(f"{args.namespace}.backend.rl")
    served = [generate_endpoint.serve_endpoint(handler_for(engine, args))]
    if args.admin_family == "vllm":
        registry = RLRouteRegistry(runtime, world_size=1)
        register_rl_routes(runtime, registry, engine.admin_routes(), enable_dispatch=True)
        served.append(rl_endpoint.serve_endpoint(registry.dispatch_stream))
    else:
        register_engine_routes(runtime, engine, generate_endpoint)

    shutdown_tasks: list[asyncio.Task[None]] = []

    async def shut_down() -> None:
        # Release held requests and let their last chunks leave, then leave discovery before
        # stopping (as vLLM's
        # graceful_shutdown_with_discovery does): the frontend drops the model at once
        # instead of routing to a dead worker while its file-discovery entry expires (~12 s).
        engine.shutdown()
        await engine.idle(SHUTDOWN_DRAIN_S)
        endpoints = [generate_endpoint] + ([rl_endpoint] if args.admin_family == "vllm" else [])
        for endpoint in endpoints:
            with contextlib.suppress(Exception):
                await endpoint.unregister_endpoint_instance()
        runtime.shutdown()

    def on_signal(signum: int) -> None:
        log.info("signal %d: shutting down", signum)
        if not shutdown_tasks:
            shutdown_tasks.append(loop.create_task(shut_down()))

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)

    runtime_config = ModelRuntimeConfig()
    runtime_config.context_length = args.context_length
    runtime_config.max_num_seqs = MAX_NUM_SEQS
    runtime_config.set_engine_specific("sglang_generate", "true")
    runtime_config.set_engine_specific("vllm_inference_v1_generate", "true")
    if args.admin_family == "vllm":
        # vLLM's overflow contract (dynamo/vllm/capacity.py, publish_vllm_token_budget): the
        # frontend refuses a prompt, or a prompt plus max_tokens, beyond the context length.
        runtime_config.set_engine_specific(
            "token_budget",
            json.dumps(
                {
                    "combined_limit": args.context_length,
                    "reject_prompt_overflow": True,
                    "reject_total_overflow": True,
                }
            ),
        )
    await register_model(
        ModelInput.Tokens,
        ModelType.Chat | ModelType.Completions,
        generate_endpoint,
        str(args.model_dir),
        args.model_name,
        worker_type=WorkerType.Aggregated,
        kv_cache_block_size=KV_CACHE_BLOCK_SIZE,
        runtime_config=runtime_config,
    )
    log.info(
        "serving model %r from %s, %s administration, engine faults: %s",
        args.model_name,
        args.model_dir,
        args.admin_family,
        ", ".join(faults.names) or "none",
    )
    await asyncio.gather(*served)


def handler_for(engine: ToyEngine, args: argparse.Namespace) -> Any:
    log_requests = args.log_requests or os.environ.get(LOG_REQUESTS_ENV, "") not in ("", "0")
    return _request_logger(engine) if log_requests else engine.generate


def register_engine_routes(runtime: Any, engine: ToyEngine, generate_endpoint: Any) -> None:
    """SGLang's `/engine` routes on the system server, as 1.6.1's SGLang worker registers them
    (`BaseWorkerHandler.register_engine_routes`): after each native route, under one lock, the
    generate endpoint leaves discovery while the engine is paused or released and rejoins
    when it is not (`_sync_discovery_with_sglang_pause_state`)."""
    lock = asyncio.Lock()
    registered = [True]

    async def sync() -> None:
        if engine.faults.active("stopped_worker_listed") or engine.routable == registered[0]:
            return
        if engine.routable:
            await generate_endpoint.register_endpoint_instance()
        else:
            await generate_endpoint.unregister_endpoint_instance()
        registered[0] = engine.routable

    def synchronized(callback: RouteCallback) -> RouteCallback:
        async def handle(body: Any) -> Json:
            async with lock:
                try:
                    return await callback(body)
                finally:
                    await sync()

        return handle

    for name, callback in engine.admin_routes().items():
        if engine.follows_pause_state(name):
            callback = synchronized(callback)
        runtime.register_engine_route(name, callback)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_engine_faults:
        print("\n".join(catalogue_lines()))
        return 0
    try:
        faults = engine_faults(args.engine_fault)
    except UnknownFaultError as exc:
        parser.error(str(exc))  # exits 2
    if args.model_dir is None:
        parser.error("--model-dir is required")
    if not (args.model_dir / "tokenizer.json").is_file():
        parser.error(f"--model-dir {args.model_dir} has no tokenizer.json")
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    try:
        import uvloop  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover - the Dynamo environment ships uvloop
        asyncio.run(serve(args, faults))
    else:
        uvloop.run(serve(args, faults))
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
