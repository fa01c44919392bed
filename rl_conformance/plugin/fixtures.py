"""The `rl_*` fixtures: what a conformance test (ours, or an adapter's) is given.

- `rl_target`: the deployment under test (parametrized over the run's targets, session scope);
- `rl_client`: the one HTTP client of the run (deadlines, caps, circuit breaker, wire log);
- `rl_verdict`: collects the test's check results; the first failure raises with the evidence;
- `rl_admin`: administrative calls under the run's mutation policy for the target;
- `rl_admin_workers`: the workers discovery lists plus those given by URL;
- `rl_weights`: the new weights of updates, a checkpoint or a transfer (refuses when asked);
- `rl_probe`: the target's fake-only channels, for tests marked `needs(...)`;
- `rl_references`: what a checkpoint itself says a probe gives (`policy_reference`).
"""

from __future__ import annotations

import pytest

from ..client.http import Client
from ..control.admin import AdminClient, AdminWorker
from ..control.fleet import resolve_workers
from ..control.policy_reference import ReferenceSource
from ..control.weights import WeightSource
from ..model.target import Probe, Target, judged_only_where_offered
from ..model.verdict import Unobservable, Verdict
from .state import state_of


@pytest.fixture(scope="session")
def rl_client(request: pytest.FixtureRequest) -> Client:
    return state_of(request.config).http()


@pytest.fixture(scope="session")
def rl_target(request: pytest.FixtureRequest, rl_client: Client) -> Target:
    return state_of(request.config).pool.get(request.param, rl_client)


@pytest.fixture
def rl_verdict() -> Verdict:
    return Verdict()


@pytest.fixture
def rl_admin(request: pytest.FixtureRequest, rl_client: Client, rl_target: Target) -> AdminClient:
    state = state_of(request.config)
    return AdminClient(rl_client, state.policy_for(rl_target), ledger=state.ledger)


@pytest.fixture
def rl_admin_workers(rl_client: Client, rl_target: Target) -> list[AdminWorker]:
    """Discovery's workers, plus the worker URLs given for workers discovery does not list
    (see `fleet.resolve_workers`)."""
    return resolve_workers(rl_client, rl_target)


@pytest.fixture
def rl_probe(request: pytest.FixtureRequest, rl_target: Target) -> Probe:
    """The target's fake-only channels, for tests that declare them with `needs(...)`: a test
    cannot lean on a launcher's private knowledge without saying so, and on a target that lacks
    a declared channel it is skipped with the channel named."""
    marker = request.node.get_closest_marker("needs")
    needed = set(marker.args) if marker else set()
    if not needed:
        raise pytest.UsageError(
            f"{request.node.nodeid} uses the probe without declaring @pytest.mark.needs(...)"
        )
    missing = sorted(needed - rl_target.offers)
    if missing or rl_target.probe is None:
        raise Unobservable(judged_only_where_offered(missing))
    return rl_target.probe


@pytest.fixture
def rl_weights(request: pytest.FixtureRequest, rl_target: Target) -> WeightSource:
    """Where the new weights of this target's updates come from (see `weights.WeightSource`):
    it refuses when asked, not at setup, so a test first reports what it can observe without
    mutating (an absent feature)."""
    return state_of(request.config).weights_for(rl_target)


@pytest.fixture
def rl_references(request: pytest.FixtureRequest, rl_target: Target) -> ReferenceSource:
    """References for the served policy of this target's checkpoints (computed when asked, so a
    test reports what it can observe first; without an input it names the flag)."""
    return state_of(request.config).references_for(rl_target)
