"""A run's plan: its configuration checked once, the targets it will test (none started yet) and
the rule of which of them the run may change. The command line builds it; the runner, the pytest
plugin, the budget and the admin fixtures read it and never check the flags again."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..client.network import Network, network_of
from ..model.config import RunConfig
from ..model.credentials import Credentials
from ..model.mutations import MutationPolicy, MutationRule
from .inputs import check_config
from .plan import TargetPool, plan_targets


@dataclass(frozen=True)
class RunPlan:
    config: RunConfig
    pool: TargetPool
    """The run's launchers by target id; each target starts on first use."""
    mutations: MutationRule
    credentials: Credentials = field(default_factory=Credentials)
    """What each request to the deployment at --frontend carries, by plane (read once, when
    the plan is made; every secret is registered with the redactor then)."""
    network: Network = field(default_factory=Network)
    """How the run reaches deployments: the certificates it trusts and shows, its proxies."""

    def policy_for(self, kind: str) -> MutationPolicy:
        """What the run may change on a target of `kind` (`Target.kind`)."""
        return self.mutations.for_target(kind)

    def read_only_targets(self) -> set[str]:
        """The targets on which no mutating test may send a generation request."""
        return {
            target_id
            for target_id, launcher in self.pool.launchers.items()
            if not self.policy_for(launcher.kind).allowed
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
    """The plan of a run of `config`; raises `ConfigurationError` for contradictory flags
    (`RunConfig.validate`), an input wrong whatever the deployment (`inputs.check_config`) or a
    certificate file or proxy that cannot be used (`network.network_of`), before anything
    starts."""
    config.validate()
    check_config(config)
    network = network_of(config)
    pool = plan_targets(config, network)
    return RunPlan(config, pool, MutationRule.from_config(config), config.credentials(), network)
