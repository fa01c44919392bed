"""A pause given up on at its deadline can still land after the resume that released it (our
fake's `second_pause_hangs`, after FastDeploy #7825): the worker is left paused, and
`resume_until_served` brings it back so the tests after it judge a running worker."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from rl_conformance.client.http import Client
from rl_conformance.control.admin import AdminClient, AdminWorker
from rl_conformance.control.admin_steps import READY_PROBE, resume_until_served
from rl_conformance.control.families import VLLM
from rl_conformance.control.fleet import discovered_workers
from rl_conformance.control.refresh import pinned_generation
from rl_conformance.launchers.fake import FakeLauncher
from rl_conformance.model.mutations import MutationPolicy
from rl_conformance.model.target import Target


@pytest.fixture
def hanging() -> Iterator[tuple[Client, Target, AdminClient, AdminWorker]]:
    launcher = FakeLauncher("vllm", workers=1, faults=("second_pause_hangs",))
    target = launcher.start()
    client = Client()
    try:
        (worker,) = discovered_workers(client, target)
        yield client, target, AdminClient(client, MutationPolicy(allowed=True)), worker
    finally:
        client.close()
        launcher.stop()


def served(client: Client, target: Target, worker: AdminWorker) -> bool:
    answer = pinned_generation(client, target, worker, READY_PROBE, max_tokens=1, deadline_s=1.0)
    return answer.status == 200


def test_a_pause_that_lands_after_the_resume_is_released(
    hanging: tuple[Client, Target, AdminClient, AdminWorker],
) -> None:
    client, target, admin, worker = hanging
    assert admin.call(worker, VLLM.pause, {"mode": "keep"}, deadline_s=5).status == 200
    late = admin.call(worker, VLLM.pause, {"mode": "keep"}, deadline_s=0.3)
    assert late.status is None  # given up on: the fake holds it until a resume
    assert admin.call(worker, VLLM.resume, {}, deadline_s=5).status == 200
    time.sleep(0.2)  # the held pause applies itself once the worker runs
    assert not served(client, target, worker)  # what the tests after would have met
    resume_until_served(admin, target, VLLM, [worker])
    assert served(client, target, worker)
