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

from fake_backends.deployment.assembly import Assembly
from fake_backends.deployment.credentials import RequiredCredentials
from fake_backends.deployment.options import DeploymentOptions, add_options, parsed
from fake_backends.deployment.ready_line import ready_line
from fake_backends.deployment.serving import run_fast, settle_heap
from fake_backends.faults.deployment import FAULT_NAMES, catalogue_lines
from fake_backends.runtime.personalities import BACKENDS

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
        "--fault",
        action="append",
        default=[],
        metavar="NAME",
        help="switch a fault on (repeatable); see --list-faults",
    )
    parser.add_argument(
        "--list-faults", action="store_true", help="print NAME<TAB>description lines and exit"
    )
    add_options(parser)  # the deployment's own (`deployment.options.OPTIONS`)
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
        options = DeploymentOptions.build(args.backend, **parsed(args))
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
            options,
            faults=args.fault,
            host=args.host,
            port=args.port,
            rl_port=args.rl_port,
            control_port=args.control_port,
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
