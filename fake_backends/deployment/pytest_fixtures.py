"""A pytest fixture factory for fake deployments (not registered as a plugin).

Import what you need into a ``conftest.py`` or a test module::

    from fake_backends.deployment.pytest_fixtures import fake_deployment  # noqa: F401

    @pytest.mark.parametrize("fake_deployment", ["sglang"], indirect=True)
    def test_something(fake_deployment): ...

or build a fixture with other defaults (the name is what tests ask for)::

    trtllm_deployment = make_fake_deployment_fixture("trtllm_deployment", "trtllm", scope="module")

The fixture that starts a deployment stops it; faults switched on during a test are
switched off again afterwards for fixtures shared across tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

import pytest

from fake_backends.deployment.assembly import FakeDeployment

Scope = Literal["session", "package", "module", "class", "function"]


def make_fake_deployment_fixture(
    name: str,
    backend: str = "vllm",
    *,
    scope: Scope = "function",
    workers: int = 2,
    model: str = "toy",
    faults: Iterable[str] = (),
    **deployment_options: Any,
) -> Callable[..., Any]:
    """Return a fixture named ``name`` yielding a started ``FakeDeployment``.

    ``deployment_options`` are further ``FakeDeployment`` keyword arguments
    (``worker_namespaces``, ``admin_family``, ``engine_routes``, ``listener_env`` ...).
    Indirect parametrization (``request.param``) overrides the backend: a backend name,
    or a dict of ``FakeDeployment`` keyword arguments including ``backend``.
    """
    initial = tuple(faults)

    def _fixture(request: pytest.FixtureRequest) -> Iterator[FakeDeployment]:
        options: dict[str, Any] = {
            "workers": workers,
            "model": model,
            "faults": initial,
            **deployment_options,
        }
        chosen = backend
        param = getattr(request, "param", None)
        if isinstance(param, str):
            chosen = param
        elif isinstance(param, dict):
            options.update(param)
            chosen = str(options.pop("backend", backend))
        deployment = FakeDeployment(chosen, **options)
        with deployment:
            yield deployment

    fixture: Callable[..., Any] = pytest.fixture(_fixture, scope=scope, name=name)
    return fixture


fake_deployment = make_fake_deployment_fixture("fake_deployment")
