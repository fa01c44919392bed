"""Where an administration family has no version route (SGLang 0.5.21 has no
`get_weight_version`), the weight version is read from the first read-only info route the
deployment allowlists (`get_model_info`, `get_server_info`: both report `weight_version`), named
with it; a deployment that allowlists neither leaves nothing to read."""

from __future__ import annotations

from fake_backends.deployment.assembly import FakeDeployment
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker, MutationPolicy
from rl_conformance.control.families import SGLANG
from rl_conformance.control.refresh import info_version


def read(engine_routes: str) -> tuple[str, object] | None:
    with FakeDeployment("sglang", workers=1, engine_routes=engine_routes) as deployment:
        worker = AdminWorker(None, deployment.workers[0]["system_url"], None)
        with Client() as client:
            return info_version(AdminClient(client, MutationPolicy()), worker, SGLANG)


def test_the_version_comes_from_the_first_allowlisted_info_route() -> None:
    assert read("get_model_info get_server_info") == ("get_model_info", "default")
    assert read("get_server_info") == ("get_server_info", "default")


def test_nothing_is_read_where_no_info_route_is_allowlisted() -> None:
    assert read("") is None
