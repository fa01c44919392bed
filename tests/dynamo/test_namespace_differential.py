"""The namespace-scope oracle held against the REAL Dynamo 1.6.1 RL listener, over generated
environments.

One real worker process registers the RL endpoint in a pool of namespaces (every class the spec
talks about: exact, prefixed generations, operator generations, look-alikes, case, hyphens, plus
seeded random names); hypothesis generates listener environments (DYN_NAMESPACE_PREFIX,
DYN_NAMESPACE_WORKER_SUFFIX, DYN_NAMESPACE, the undocumented DYN_NAMESPACE_PREFIX_STRICT) from
values that collide with the pool; for each, the real frontend is restarted under exactly that
environment and the namespaces its listener lists must be the oracle's.

`NAMESPACE_DIFFERENTIAL_EXAMPLES=N` runs N environments (default 12, about 20 s).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from namespace_zoo import NamespaceZooLauncher

from rl_conformance.checks.namespace_scope import resolve_scope

pytestmark = pytest.mark.slow

CLASSES = (
    "dynamo",
    "dynamo-0123abcd",
    "dynamo-legacy",
    "dynamo-x",
    "dyn",
    "ns",
    "ns-",
    "ns--x",
    "ns-abc123",
    "ns-abc123-x",
    "ns-0123abcd",
    "ns-legacy",
    "ns-legacy-x",
    "ns-ABCDEF12",
    "ns-0123abcde",
    "ns-0123abcd-x",
    "ns2",
    "NS",
    "Ns-abc",
    "other-ns",
    "x-0123abcd",
    "a",
)


def _random_names(count: int, seed: int = 20261203) -> list[str]:
    rng = random.Random(seed)
    alphabet = "abcdef0123456789-"
    names = []
    while len(names) < count:
        name = rng.choice("abns") + "".join(rng.choice(alphabet) for _ in range(rng.randrange(9)))
        if name not in CLASSES and name not in names:
            names.append(name)
    return names


POOL = (*CLASSES, *_random_names(10))
EXAMPLES = int(os.environ.get("NAMESPACE_DIFFERENTIAL_EXAMPLES", "12"))
SETTLE_S = 5.0

names = st.one_of(
    st.sampled_from(["", "dynamo", "ns", "ns-", "NS", "dynamo-", "x", "abc123", "legacy"]),
    st.sampled_from(POOL),
    st.sampled_from(POOL).flatmap(lambda name: st.integers(0, len(name)).map(lambda i: name[:i])),
)
environments = st.fixed_dictionaries(
    {},
    optional={
        "DYN_NAMESPACE_PREFIX": names,
        "DYN_NAMESPACE_WORKER_SUFFIX": st.one_of(
            st.sampled_from(["", "abc123", "0123abcd", "legacy", "x"]), names
        ),
        "DYN_NAMESPACE": names,
        "DYN_NAMESPACE_PREFIX_STRICT": st.sampled_from(
            ["", "0", "1", "true", "TRUE", "yes", "On", "false", "2", "y"]
        ),
    },
)


@pytest.fixture(scope="module")
def zoo(dynamo_python: Path) -> Iterator[tuple[NamespaceZooLauncher, str]]:
    launcher = NamespaceZooLauncher(engine="fake-vllm", python=dynamo_python, namespaces=POOL)
    target = launcher.start()
    try:
        assert target.rl_url is not None
        yield launcher, target.rl_url
    finally:
        launcher.stop()


def listed(rl_url: str) -> tuple[str, list[str]]:
    body: dict[str, Any] = httpx.get(rl_url + "/v1/rl/workers", timeout=10).json()
    return str(body["namespace"]), sorted({str(worker["namespace"]) for worker in body["workers"]})


def settled(rl_url: str, expected: tuple[str, list[str]]) -> tuple[str, list[str]]:
    """What the listener lists once its discovery caught up: a restarted listener finds the
    pool's endpoints over a few hundred milliseconds, so a partial list is read again."""
    deadline = time.monotonic() + SETTLE_S
    observed = listed(rl_url)
    while observed != expected and time.monotonic() < deadline:
        time.sleep(0.2)
        observed = listed(rl_url)
    return observed


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(env=environments)
@example(env={"DYN_NAMESPACE_PREFIX": "ns-"})
@example(env={"DYN_NAMESPACE_PREFIX": "ns", "DYN_NAMESPACE_PREFIX_STRICT": "yes"})
@example(env={"DYN_NAMESPACE_PREFIX": "", "DYN_NAMESPACE": "", "DYN_NAMESPACE_WORKER_SUFFIX": "x"})
def test_the_oracle_agrees_with_the_real_listener(
    zoo: tuple[NamespaceZooLauncher, str], env: dict[str, str]
) -> None:
    launcher, rl_url = zoo
    launcher.rescope_listener(env)
    scope = resolve_scope(env)
    expected = (scope.label, sorted(ns for ns in POOL if scope.matches(ns)))
    assert settled(rl_url, expected) == expected, env
