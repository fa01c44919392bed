"""Faithful and violating observations of the RL listener's route-probe checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rl_conformance.checks import CheckResult, probes

from . import bodies

Case = tuple[Callable[[], CheckResult], Callable[[], CheckResult]]
HUNG = 12661255104908017940
"""The second worker of `bodies.discovery()`: the one whose probe is replaced."""


def with_second(**fields: Any) -> dict[str, Any]:
    body = bodies.discovery()
    second = body["workers"][1]
    for name in ("system_url", "world_size"):
        second.pop(name)
    second.update(fields)
    return body


def refused(error: str = "worker routes response has invalid 'world_size'") -> dict[str, Any]:
    return with_second(routes=[], error=error)


def _listed(routes: list[str]) -> dict[str, Any]:
    body = bodies.discovery()
    body["workers"][1].update(routes=routes, world_size=2)
    return body


def _other_changed() -> dict[str, Any]:
    body = refused()
    body["workers"][0]["routes"] = []
    return body


CASES: dict[str, Case] = {
    "discovery.probe_refusal_listed": (
        lambda: probes.probe_refusal_listed(
            refused("engine is dead"), HUNG, "erred", "engine is dead"
        ),
        lambda: probes.probe_refusal_listed(refused(), HUNG, "erred", "engine is dead"),
    ),
    "discovery.probe_reply_listed": (
        lambda: probes.probe_reply_listed(_listed(["a", "b"]), HUNG, ["b", "a", "a"], 2),
        lambda: probes.probe_reply_listed(_listed(["b", "a", "a"]), HUNG, ["b", "a", "a"], 2),
    ),
    "discovery.others_unchanged": (
        lambda: probes.others_unchanged(bodies.discovery(), refused(), HUNG),
        lambda: probes.others_unchanged(bodies.discovery(), _other_changed(), HUNG),
    ),
    "discovery.probe_deadline_kept": (
        lambda: probes.probe_deadline_kept(200, None, 2, 45),
        lambda: probes.probe_deadline_kept(None, "no complete response within 45 s", 2, 45),
    ),
}
