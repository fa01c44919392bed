"""Administration over a fleet: one pause and one resume sent to every worker of a fake vLLM
deployment with 4 and with 100 workers, through the harness's own `AdminClient.call_each`
(at most `admin.FANOUT` calls in flight), and the same one at a time for comparison. Each
engine call takes `--engine-call-delay-ms` (default 50) before it acts, as a real engine's
pause does; without it a fake's call is a few hundred microseconds of CPU and the figure would
measure only this machine's two cores.

Prints figures; asserts nothing. Usage: python benchmarks/admin_fanout.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from unittest import mock

from rl_conformance.client.http import Client
from rl_conformance.control import admin
from rl_conformance.control.admin import AdminClient
from rl_conformance.control.fleet import resolve_workers
from rl_conformance.launchers import FakeLauncher
from rl_conformance.model.mutations import MutationPolicy


def pause_and_resume(admin_client: AdminClient, workers: list, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        for route in ("pause_generation", "resume_generation"):
            exchanges = admin_client.call_each(workers, route, {})
            assert all(exchange.status == 200 for exchange in exchanges), route
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def fleet(size: int, repeat: int, delay_ms: float) -> tuple[float, float]:
    launcher = FakeLauncher(
        "vllm", workers=size, extra_args=("--engine-call-delay-ms", f"{delay_ms:g}")
    )
    target = launcher.start()
    client = Client()
    try:
        workers = resolve_workers(client, target)
        assert len(workers) == size, f"discovery listed {len(workers)} of {size} workers"
        admin_client = AdminClient(client, MutationPolicy(allowed=True))
        bounded = pause_and_resume(admin_client, workers, repeat)
        with mock.patch.object(admin, "FANOUT", 1):
            one_at_a_time = pause_and_resume(admin_client, workers, repeat)
        return bounded, one_at_a_time
    finally:
        client.close()
        launcher.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--engine-call-delay-ms", type=float, default=50.0)
    args = parser.parse_args()
    few, few_serial = fleet(4, args.repeat, args.engine_call_delay_ms)
    many, many_serial = fleet(100, args.repeat, args.engine_call_delay_ms)
    print(
        f"pause + resume, median of {args.repeat} (FANOUT {admin.FANOUT}, each engine call "
        f"{args.engine_call_delay_ms:g} ms):"
    )
    print(f"  4 workers:   {few * 1000:7.1f} ms   (one at a time: {few_serial * 1000:7.1f} ms)")
    print(f"  100 workers: {many * 1000:7.1f} ms   (one at a time: {many_serial * 1000:7.1f} ms)")
    print(f"  100 workers / 4 workers: {many / few:.1f}x the time for 25x the workers")
    print(f"  bounded fan-out vs one at a time on 100 workers: {many_serial / many:.1f}x faster")


if __name__ == "__main__":
    main()
