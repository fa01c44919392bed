"""The fault demonstrations' fleet: one fake vLLM worker, fresh for each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fake_backends.deployment.assembly import FakeDeployment


@pytest.fixture
def dep() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm") as deployment:
        yield deployment
