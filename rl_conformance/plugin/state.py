"""What one run holds while it runs, kept on pytest's `config.stash`: never in module globals,
so two runs in one process (the kill matrix, the pass-through study) cannot see each other."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest

from ..client.budget import CountingClient, PlannedTest
from ..client.identity import INITIAL_POLICY, AttemptIdentity
from ..control.ledger import AdminLedger
from ..control.policy_reference import ReferenceSource
from ..control.weights import WeightSource
from ..launchers.plan import TargetPool
from ..launchers.run_plan import RunPlan
from ..model.config import RunConfig
from ..model.matrix import Matrix, TestRecord
from ..model.mutations import MutationPolicy
from ..model.target import Target


@dataclass
class RunState:
    run: RunPlan
    records: list[TestRecord] = field(default_factory=list)
    client: CountingClient | None = None
    current_target: str = ""
    """The target of the test now running: the client counts generation requests against it."""
    plan: list[PlannedTest] = field(default_factory=list)
    """Each collected test, its estimated generations and whether the budget covers it."""
    active: bool = False
    started_at: datetime | None = None
    timer: threading.Timer | None = None
    incomplete_reason: str | None = None
    matrix: Matrix | None = None
    weight_sources: dict[str, WeightSource] = field(default_factory=dict)
    references: dict[str, ReferenceSource] = field(default_factory=dict)
    ledger: AdminLedger = field(default_factory=AdminLedger)
    """What each administered worker was last left in, for a run stopped mid-refresh."""
    deaths: dict[str, Any] = field(default_factory=dict)
    """Target -> the `deaths.Death` of its worker, while it is not brought back."""
    worker_started: dict[str, int] = field(default_factory=dict)
    """System URL -> the ledger position at which its worker last (re)started: a death is
    looked for among the calls sent to it since."""
    call_owners: list[tuple[int, str]] = field(default_factory=list)
    """(ledger position at its start, node id) of each test, in order: which test sent a call."""
    restarts: dict[str, int] = field(default_factory=dict)
    """Target -> how many times a dead worker of it was restarted."""
    policy_versions: dict[str, str] = field(default_factory=dict)
    """Target -> the weight version the suite last had its workers load: the
    X-RL-Policy-Version its generation requests carry (`client.identity`)."""

    def new_attempt_identity(self) -> None:
        """A test is a rollout of its own; the policy version carries over within a target."""
        client = self.client
        if client is None:
            return
        old = client.identity
        if old.target_id:
            self.policy_versions[old.target_id] = old.policy_version
        client.identity = AttemptIdentity(
            policy_version=self.policy_versions.get(self.current_target, INITIAL_POLICY),
            target_id=self.current_target,
        )

    @property
    def config(self) -> RunConfig:
        return self.run.config

    @property
    def pool(self) -> TargetPool:
        return self.run.pool

    def policy_for(self, target: Target) -> MutationPolicy:
        """What the run may change on `target` (the plan's one mutation rule)."""
        return self.run.policy_for(target.kind, target.id)

    def weights_for(self, target: Target) -> WeightSource:
        """One source per target for the whole run: consecutive updates alternate between the
        given checkpoints or transfers, and a worker's transfer engine is initialised once."""
        source = self.weight_sources.get(target.id)
        if source is None:
            inputs = self.run.inputs_for(target.id)
            source = WeightSource(
                self.policy_for(target),
                target,
                model_paths=inputs.update_model_path or target.update_model_paths,
                transfers=inputs.weight_transfers(),
            )
            self.weight_sources[target.id] = source
        return source

    def references_for(self, target: Target) -> ReferenceSource:
        """Where the served-policy references of this target's checkpoints come from (their files,
        or a cold start on them through the target's probe); each is computed once per run."""
        found = self.references.get(target.id)
        if found is None:
            from ..launchers.dynamo_python import find_dynamo_python

            inputs = self.run.inputs_for(target.id)
            found = self.references[target.id] = ReferenceSource.build(
                self.config.reference_python,
                inputs.update_model_path or target.update_model_paths,
                inputs.reference_checkpoint,
                fallback_python=find_dynamo_python(vllm=True) or find_dynamo_python(sglang=True),
                probe=target.probe,
            )
        return found

    def http(self) -> CountingClient:
        if self.client is None:
            self.client = CountingClient(
                deadline_s=self.config.deadline,
                budget=self.config.budget_generations,
                network=self.run.network,
            )
        self.aim(self.client)
        return self.client

    def aim(self, client: CountingClient) -> None:
        """Point the client at the target of the test now running: its generations are counted
        against it, and its requests carry that deployment's credentials (none for one the run
        started)."""
        client.target_id = self.current_target
        client.credentials = self.run.credentials_for(self.current_target)


STATE: pytest.StashKey[RunState] = pytest.StashKey()


def state_of(config: pytest.Config) -> RunState:
    return config.stash[STATE]


def shutdown(state: RunState) -> None:
    """Stop every deployment the run started and close its client."""
    state.pool.stop_all()
    if state.client is not None:
        state.client.close()
        state.client = None
