"""``python -m fake_backends {vllm|sglang|trtllm} [options]``: serve a fake deployment.

Prints exactly one JSON ready line on stdout once every server listens, logs to stderr,
and stops cleanly (all servers closed, exit 0) on SIGTERM or SIGINT.  Configuration
errors (unknown faults, a bad ``--engine-route`` descriptor, ...) exit 2 with the reason.
The RL listener scopes discovery from this process's environment (``DYN_NAMESPACE``,
``DYN_NAMESPACE_PREFIX``, ``DYN_NAMESPACE_WORKER_SUFFIX``), as the real frontend does.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from fake_backends.deployment.assembly import (
    LISTING_ORDERS,
    VOCAB_SIZE,
    Assembly,
    DeploymentOptions,
)
from fake_backends.deployment.credentials import RequiredCredentials
from fake_backends.deployment.ingress import INGRESS_CODINGS
from fake_backends.deployment.ready_line import ready_line
from fake_backends.deployment.serving import run_fast, settle_heap
from fake_backends.faults.deployment import FAULT_NAMES, catalogue_lines
from fake_backends.runtime.personalities import ADMIN_FAMILIES, BACKENDS

log = logging.getLogger("fake_backends")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fake_backends",
        description=(
            "Serve a fake NVIDIA Dynamo deployment (frontend, RL listener, worker system servers)."
        ),
    )
    parser.add_argument("backend", nargs="?", choices=BACKENDS, help="backend personality")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="frontend port (0 = ephemeral)")
    parser.add_argument(
        "--rl-port", type=int, default=0, help="RL discovery listener port (0 = ephemeral)"
    )
    parser.add_argument(
        "--control-port", type=int, default=0, help="loopback fault-control port (0 = ephemeral)"
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="number of engine workers (default 2)"
    )
    parser.add_argument("--model", default="toy", help="served model name (default toy)")
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME",
        help="switch a fault on (repeatable); see --list-faults",
    )
    parser.add_argument(
        "--list-faults", action="store_true", help="print NAME<TAB>description lines and exit"
    )
    parser.add_argument(
        "--worker-namespace",
        action="append",
        default=[],
        metavar="NS",
        help="Dynamo namespace of the next worker (repeatable, in worker order; default dynamo)",
    )
    parser.add_argument(
        "--admin-family",
        choices=ADMIN_FAMILIES,
        default="python",
        help="vLLM only: Python worker RL routes (default) or the native sidecar's "
        "control/* and update/* routes",
    )
    parser.add_argument(
        "--engine-route",
        action="append",
        default=None,
        metavar="DESCRIPTOR",
        help="SGLang only: expose an engine method as /engine/<path>, "
        "path[=method][:engine|tm] (repeatable; default: $DYN_SGLANG_ENGINE_ROUTES)",
    )
    parser.add_argument(
        "--rl-worker-order",
        choices=LISTING_ORDERS,
        default="sorted",
        help="order of the RL listener's workers: sorted (default, as the real listener), or "
        "the same workers rotated or shuffled anew on every read (legal: clients must never "
        "read list position as identity)",
    )
    parser.add_argument(
        "--migration-limit",
        type=int,
        default=0,
        metavar="N",
        help="how many times the frontend moves a request whose worker's process died to "
        "another worker, continuing from the tokens so far (Dynamo's --migration-limit; "
        "default 0, Dynamo's default: never)",
    )
    parser.add_argument(
        "--initial-model-path",
        default=None,
        metavar="PATH",
        help="every worker starts with the weights an update_weights_from_disk of PATH gives "
        "(a cold start on that checkpoint; default: the toy model's initial weights)",
    )
    parser.add_argument(
        "--ingress-coding",
        choices=INGRESS_CODINGS,
        default="identity",
        help="an ingress in front of the frontend compresses its JSON and event streams in this "
        "coding for clients that accept it, as nginx's gzip does (legal; default identity)",
    )
    parser.add_argument(
        "--unpaused-update-status",
        type=int,
        default=200,
        metavar="STATUS",
        help="vLLM only: the HTTP status a worker refuses a weight update while running with: "
        "200 (Dynamo's handled error, the default) or a 4xx of its own such as 409 (legal)",
    )
    parser.add_argument(
        "--vocabulary",
        type=int,
        default=VOCAB_SIZE,
        metavar="N",
        help="the prompt ids the model takes: the frontend refuses a prompt id >= N with 400 "
        f"as a small model's engine does (default {VOCAB_SIZE}, the toy vocabulary)",
    )
    parser.add_argument(
        "--admin-base-url",
        action="store_true",
        help="every listed worker also carries world_size 2 and an admin_base_url apart from "
        "its system_url, as a tensor-parallel worker publishes them (legal)",
    )
    parser.add_argument(
        "--engine-call-delay-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="every worker /engine call takes this long before it acts, as a real engine's "
        "pause or weight update does (default 0)",
    )
    parser.add_argument(
        "--dynamo-release",
        default=None,
        metavar="RELEASE",
        help="the Dynamo release whose frontend to play (1.6.1: one nvext.metadata_upload "
        "form; default: the newest the fakes know). Never published as Dynamo's version: a "
        "suite reaching this fake by URL is told with its own --dynamo-release",
    )
    parser.add_argument(
        "--require-header",
        action="append",
        default=[],
        metavar="PLANE=NAME: VALUE",
        help="every request to PLANE (frontend, rl, system) must carry this header, else it is "
        "answered 401 as an authenticating ingress does (repeatable)",
    )
    parser.add_argument(
        "--require-query",
        action="append",
        default=[],
        metavar="PLANE=NAME=VALUE",
        help="every request to PLANE must carry this query parameter, else 401 (repeatable)",
    )
    return parser


async def _serve(assembly: Assembly) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def announce() -> None:
        sys.stdout.write(ready_line(assembly.ready_info()) + "\n")
        sys.stdout.flush()
        log.info("fake %s deployment ready at %s", assembly.backend, assembly.frontend_url)

    try:
        await assembly.group.serve(stop, on_ready=announce)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    log.info("fake %s deployment stopped", assembly.backend)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_faults:
        sys.stdout.write("".join(line + "\n" for line in catalogue_lines()))
        sys.stdout.flush()
        return 0
    if args.backend is None:
        parser.error("a backend is required: " + ", ".join(BACKENDS))
    unknown = [name for name in args.fault if name not in FAULT_NAMES]
    if unknown:
        parser.error(
            f"unknown fault(s) {', '.join(unknown)}; valid faults: {', '.join(FAULT_NAMES)}"
        )
    if args.workers < 0:
        parser.error("--workers must be >= 0")
    try:
        DeploymentOptions.build(
            args.backend,
            workers=args.workers,
            model=args.model,
            worker_namespaces=args.worker_namespace,
            admin_family=args.admin_family,
            engine_routes=args.engine_route,
            listing_order=args.rl_worker_order,
            initial_model_path=args.initial_model_path,
            ingress_coding=args.ingress_coding,
            unpaused_update_status=args.unpaused_update_status,
            vocabulary=args.vocabulary,
            admin_base_urls=args.admin_base_url,
            migration_limit=args.migration_limit,
        )
        credentials = RequiredCredentials.parse(args.require_header, args.require_query)
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    try:
        assembly = Assembly(
            args.backend,
            workers=args.workers,
            model=args.model,
            faults=args.fault,
            host=args.host,
            port=args.port,
            rl_port=args.rl_port,
            control_port=args.control_port,
            worker_namespaces=args.worker_namespace,
            admin_family=args.admin_family,
            engine_routes=args.engine_route,
            engine_call_delay_s=max(0.0, args.engine_call_delay_ms) / 1000,
            listing_order=args.rl_worker_order,
            initial_model_path=args.initial_model_path,
            ingress_coding=args.ingress_coding,
            unpaused_update_status=args.unpaused_update_status,
            vocabulary=args.vocabulary,
            admin_base_urls=args.admin_base_url,
            dynamo_release=args.dynamo_release,
            migration_limit=args.migration_limit,
            credentials=credentials if credentials.planes else None,
        )
    except OSError as exc:
        log.error("cannot bind: %s", exc)
        return 1
    settle_heap()
    run_fast(_serve(assembly))
    return 0


if __name__ == "__main__":
    sys.exit(main())
