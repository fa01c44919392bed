"""Where an administration family has no version route (SGLang 0.5.21 has no
`get_weight_version`), the weight version is read from the read-only info route the deployment
allowlists (`get_model_info`), named with it; `get_server_info` reports the launch record's
version, which no update changes, so it is never read; without `get_model_info` there is nothing
to read."""

from __future__ import annotations

from fake_backends.deployment.assembly import FakeDeployment
from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.families import SGLANG
from rl_conformance.control.refresh import info_version
from rl_conformance.model.mutations import MutationPolicy


def read(engine_routes: str) -> tuple[str, object] | None:
    with FakeDeployment("sglang", workers=1, engine_routes=engine_routes) as deployment:
        worker = AdminWorker(None, deployment.workers[0]["system_url"], None)
        with Client() as client:
            return info_version(AdminClient(client, MutationPolicy()), worker, SGLANG)


def test_the_version_comes_from_the_allowlisted_model_info_route() -> None:
    assert read("get_model_info get_server_info") == ("get_model_info", "default")


def test_the_launch_record_is_never_read_as_the_current_version() -> None:
    assert read("get_server_info") is None
    assert read("") is None
