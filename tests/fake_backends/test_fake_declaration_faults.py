"""The vLLM worker reports the last version declared to it; each declaration fault breaks one
rule of it.

The ``@shows`` registry is shared with ``test_fake_faults``, whose completeness check imports
this module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fake_backend_helpers import admin, faulted, shows

from fake_backends.deployment.assembly import FakeDeployment


@pytest.fixture
def dep() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm", workers=1) as deployment:
        yield deployment


def stored(client: httpx.Client, base: str) -> Any:
    return admin(client, base, "get_weight_version")


def declare_null(client: httpx.Client, dep: FakeDeployment) -> Any:
    base = dep.workers[0]["system_url"]
    admin(client, base, "set_weight_version", {"weight_version": "v1"})
    admin(client, base, "set_weight_version", {"weight_version": None})
    return stored(client, base)


def update_unversioned(client: httpx.Client, dep: FakeDeployment) -> tuple[Any, Any]:
    base = dep.workers[0]["system_url"]
    admin(client, base, "set_weight_version", {"weight_version": "v1"})
    admin(client, base, "pause_generation", {"mode": "keep"})
    reply = admin(client, base, "update_weights_from_disk", {"model_path": "/ckpt/a"})
    admin(client, base, "resume_generation")
    return reply, stored(client, base)


@shows("null_version_undeclared")
def test_null_version_undeclared(client: httpx.Client, dep: FakeDeployment) -> None:
    assert declare_null(client, dep) == {"status": "ok", "version": None, "version_declared": True}
    with faulted(dep, "null_version_undeclared"):
        assert declare_null(client, dep)["version"] == "v1"


@shows("unversioned_update_declares")
def test_unversioned_update_declares(client: httpx.Client, dep: FakeDeployment) -> None:
    reply, after = update_unversioned(client, dep)
    assert reply == {"status": "ok", "version": "unknown", "version_declared": False}
    assert after == {"status": "ok", "version": "v1", "version_declared": True}
    with faulted(dep, "unversioned_update_declares"):
        reply, after = update_unversioned(client, dep)
    assert reply["version_declared"] is False and after["version"] == "unknown"
