"""A run's plan: its configuration checked once, the targets it will test (none started yet) and
the rule of which of them the run may change. The command line builds it; the runner, the pytest
plugin, the budget and the admin fixtures read it and never check the flags again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..client.network import Network, network_of
from ..model.config import RunConfig
from ..model.credentials import Credentials
from ..model.deployment import Deployment
from ..model.mutations import MutationPolicy, MutationRule
from .columns import plan_targets
from .inputs import check_config
from .plan import TargetPool


@dataclass(frozen=True)
class RunPlan:
    config: RunConfig
    pool: TargetPool
    """The run's launchers by target id; each target starts on first use."""
    mutations: MutationRule
    credentials: Mapping[str, Credentials] = field(default_factory=dict)
    """Target id -> what each request to that deployment given by URL carries, by plane (read
    once, when the plan is made; every secret is registered with the redactor then). The
    deployments the run starts take none."""
    deployments: Mapping[str, Deployment] = field(default_factory=dict)
    """Target id -> the options of a deployment given by URL (the flags', a targets file's
    table)."""
    network: Network = field(default_factory=Network)
    """How the run reaches deployments: the certificates it trusts and shows, its proxies."""

    def credentials_for(self, target_id: str) -> Credentials:
        """What requests to `target_id` carry (nothing for a deployment the run started)."""
        return self.credentials.get(target_id) or Credentials()

    def inputs_for(self, target_id: str) -> Deployment:
        """The checkpoints and transfers `target_id`'s updates use: its own table's, or the
        flags' (which apply to the deployments the run starts too)."""
        return self.deployments.get(target_id) or self.config.flag_deployment()

    def policy_for(self, kind: str, target_id: str = "") -> MutationPolicy:
        """What the run may change on target `target_id` of `kind` (`Target.kind`)."""
        return self.mutations.for_target(kind, target_id)

    def policy_of(self, target_id: str) -> MutationPolicy:
        """What the run may change on the target `target_id` of its pool."""
        launcher = self.pool.launchers.get(target_id)
        return self.policy_for(launcher.kind if launcher else "external", target_id)

    def read_only_targets(self) -> set[str]:
        """The targets on which no mutating test may send a generation request."""
        return {
            target_id
            for target_id, launcher in self.pool.launchers.items()
            if not self.policy_for(launcher.kind, target_id).allowed
        }

    def split_targets(self) -> set[str]:
        """The targets a parallel run may test as several deployments of the same kind at once:
        those cheap to start twice, when no generation budget is shared between processes."""
        if self.config.budget_generations is not None:
            return set()
        return {
            target_id
            for target_id, launcher in self.pool.launchers.items()
            if launcher.starts_cheaply
        }


def plan_run(config: RunConfig) -> RunPlan:
    """The plan of a run of `config`; raises `ConfigurationError` for contradictory flags or
    tables (`RunConfig.validate`), an input wrong whatever the deployment
    (`inputs.check_config`) or a certificate file or proxy that cannot be used
    (`network.network_of`), before anything starts."""
    config.validate()
    check_config(config)
    network = network_of(config)
    deployments = config.deployments()
    plan = RunPlan(
        config,
        plan_targets(config, deployments, network),
        MutationRule.from_config(config, deployments),
        {d.target_id: d.credentials() for d in deployments},
        {d.target_id: d for d in deployments},
        network,
    )
    for target_id in plan.pool.launchers:  # checked against discovery in the preflight
        workers = plan.policy_of(target_id).workers
        if workers:
            plan.pool.named_workers[target_id] = frozenset(workers)
    return plan
