"""Fixtures for the fake_backends tests: one deployment per personality per session.

The tests mirror the package: `tests/fake_backends/<subpackage>/` tests
`fake_backends/<subpackage>/`.

Deployments are shared across the folder to keep the folder fast; the ``clean_faults``
autouse fixture switches every fault off after each test so sharing is safe.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

_HERE = Path(__file__).resolve().parent
# The repository (for `fake_backends`), this folder (for `fake_backend_helpers`) and each folder
# of a subpackage's tests (so that `faults/test_fake_faults.py` imports every demonstration).
TOPIC_FOLDERS = sorted(path for path in _HERE.iterdir() if path.is_dir() and path.name[0] != "_")
for entry in (str(_HERE.parents[1]), str(_HERE), *map(str, TOPIC_FOLDERS)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from fake_backends.deployment.assembly import FakeDeployment  # noqa: E402
from fake_backends.deployment.pytest_fixtures import make_fake_deployment_fixture  # noqa: E402

vllm = make_fake_deployment_fixture("vllm", "vllm", scope="session")
sglang = make_fake_deployment_fixture("sglang", "sglang", scope="session")
trtllm = make_fake_deployment_fixture("trtllm", "trtllm", scope="session")


@pytest.fixture(params=["vllm", "sglang", "trtllm"])
def any_backend(request: pytest.FixtureRequest) -> Iterator[FakeDeployment]:
    """Each personality in turn (reusing the session-wide deployments)."""
    deployment: FakeDeployment = request.getfixturevalue(request.param)
    yield deployment
    deployment.set_faults([])


@pytest.fixture(scope="session")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as http:
        yield http


@pytest.fixture(autouse=True)
def clean_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    for name in ("vllm", "sglang", "trtllm"):
        if name in request.fixturenames:
            deployment: FakeDeployment = request.getfixturevalue(name)
            deployment.set_faults([])
