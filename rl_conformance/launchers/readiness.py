"""Waiting for a launched deployment to become ready: one loop for every launcher.

A launcher says what "ready" means (`probe`: one look at the deployment, ready or not, and what
was seen) and what "dead" means (`alive`: raises `LaunchError` when a process or container it
started has exited); `wait_until_ready` polls until ready, or raises with the last observation
once the deadline passes. Probes use their own short-lived HTTP client, never the run's (the
breaker must not count a deployment that is still starting), over the run's connections as the
run's `network` says (`httpx_wire.PoolTransport`: certificates, proxies)."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from ..client.httpx_wire import PoolTransport
from ..client.network import Network
from ..errors import LaunchError

Probe = Callable[[httpx.Client], tuple[bool, str]]
PROBE_TIMEOUT_S = 5.0


def wait_until_ready(
    what: str,
    probe: Probe,
    *,
    deadline_s: float,
    interval_s: float = 0.1,
    alive: Callable[[], None] = lambda: None,
    details: Callable[[], str] = lambda: "",
    network: Network | None = None,
) -> None:
    """Poll `probe` until it says ready; `LaunchError` naming the last observation (and
    `details()`, such as log tails) when `deadline_s` passes. `network`: how the deployment is
    reached (None: directly, a deployment on this machine)."""
    deadline = time.monotonic() + deadline_s
    last = "nothing probed yet"
    transport = PoolTransport(network, PROBE_TIMEOUT_S)
    with httpx.Client(timeout=PROBE_TIMEOUT_S, trust_env=False, transport=transport) as http:
        while True:
            alive()
            try:
                ready, last = probe(http)
            except (httpx.HTTPError, ValueError, AttributeError, KeyError, TypeError) as exc:
                ready, last = False, f"{type(exc).__name__}: {exc}"
            if ready:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            time.sleep(min(interval_s, remaining))
    extra = details()
    raise LaunchError(
        f"{what} not ready within {deadline_s:g} s (last probe: {last})"
        + (f"\n{extra}" if extra else "")
    )
