"""The in-process API and the pytest fixture factory."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from fake_backends import FAULTS, FakeDeployment
from fake_backends.deployment.pytest_fixtures import fake_deployment, make_fake_deployment_fixture

__all__ = ["fake_deployment"]  # imported so that pytest sees the fixture in this module

faulty_trtllm = make_fake_deployment_fixture(
    "faulty_trtllm", "trtllm", faults=["done_missing"], workers=1
)


def test_context_manager_starts_and_stops() -> None:
    with FakeDeployment("sglang", workers=3, model="m") as dep:
        assert dep.model == "m" and len(dep.workers) == 3
        assert all(set(w) == {"instance_id", "system_url", "namespace"} for w in dep.workers)
        assert all(w["namespace"] == "dynamo" for w in dep.workers)
        assert len({w["instance_id"] for w in dep.workers}) == 3
        info = dep.ready_info()
        assert info["frontend"] == dep.frontend_url and info["backend"] == "sglang"
        assert httpx.get(dep.frontend_url + "/v1/models").json()["data"][0]["id"] == "m"
        assert httpx.get(dep.control_url + "/faults").json()["faults"] == []
        url = dep.frontend_url
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/live", timeout=2)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown backend"):
        FakeDeployment("tgi")
    with pytest.raises(ValueError):
        FakeDeployment("vllm", workers=-1).start()


@pytest.mark.parametrize(
    "fake_deployment", ["vllm", {"backend": "sglang", "workers": 1}], indirect=True
)
def test_fixture_factory_default(fake_deployment: FakeDeployment) -> None:
    assert fake_deployment.backend in {"vllm", "sglang"}
    expected = 2 if fake_deployment.backend == "vllm" else 1
    assert len(fake_deployment.workers) == expected


def test_fixture_factory_with_faults(faulty_trtllm: FakeDeployment) -> None:
    assert faulty_trtllm.faults == ("done_missing",)
    assert len(faulty_trtllm.workers) == 1


def test_catalogue_is_described() -> None:
    """Every fault has a description and the reviewed list of capabilities it flips."""
    flips = Path(__file__).resolve().parents[3] / "fixtures" / "expected" / "kill-matrix-flips.json"
    assert set(FAULTS) == set(json.loads(flips.read_text())["flips"])
    assert all(f.description and f.applies_to for f in FAULTS.values())
