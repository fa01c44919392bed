"""Which workers a run may change: the run's one rule (`MutationRule`, from its flags and each
targets file's table) and the policy it gives each target (`MutationPolicy`), which the admin
client asks before every call that changes a worker."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from .config import RunConfig
from .deployment import FLAGS, Deployment
from .worker_sample import WorkerSample


class MutationRefused(Exception):
    """The run is read-only for this worker; the test is skipped with this reason."""


@dataclass(frozen=True)
class MutationPolicy:
    allowed: bool = False
    workers: frozenset[int] | None = None
    """Instance ids that may be mutated; None means every worker (`--all-workers`)."""
    how: str = FLAGS.allow_mutations
    """What allows mutations where they are not (the flags, or a targets file's keys)."""
    scope: str = "run"
    """What a read-only policy covers, as `describe` says it: the run (its flags), or one
    deployment (a targets file's table)."""
    widen: str = "add --worker with its id, or use --all-workers"
    """What allows mutations on a worker where they are allowed on others only."""
    sample: WorkerSample = field(default_factory=WorkerSample)
    """Of the workers a test acts on, those an effect the spec does not ask of every worker is
    read on (`--worker-sample`, `--judge-every-worker`); every one unless the run says so. Not a
    permission: every selection is made under the policy, so it travels with it."""

    @classmethod
    def from_config(cls, config: RunConfig) -> MutationPolicy:
        """`--allow-mutations` with `--worker ID...` or `--all-workers` (validated together in
        `RunConfig.validate`)."""
        return cls.of(config.flag_deployment())

    @classmethod
    def of(cls, deployment: Deployment) -> MutationPolicy:
        """What a deployment's own options allow (`allow_mutations` with `workers` or
        `all_workers`, checked by `Deployment.check`)."""
        naming = deployment.naming
        how = naming.allow_mutations
        scope = "deployment" if naming.file else "run"
        if not deployment.allow_mutations:
            return cls(how=how, scope=scope)
        workers = None if deployment.all_workers else frozenset(deployment.worker)
        widen = cls.widen
        if naming.file:
            widen = (
                f"add its id to {naming.key('worker')}, or set {naming.give('all_workers')}, "
                f"in {naming.where}"
            )
        return cls(allowed=True, workers=workers, how=how, scope=scope, widen=widen)

    def permits(self, instance_id: int | None) -> bool:
        if not self.allowed:
            return False
        return self.workers is None or instance_id in self.workers

    def refusal(self, what: str) -> MutationRefused:
        """Why `what` is not sent, naming the flags (or keys) that would allow it beyond those
        given: on a run allowed on other workers, the worker's id, not `--allow-mutations`."""
        fix = self.widen if self.allowed else f"use {self.how}"
        return MutationRefused(f"{self.describe()}: {what} not sent ({fix})")

    def describe(self) -> str:
        if not self.allowed:
            return f"read-only {self.scope}"
        if self.workers is None:
            return "mutations allowed on every worker"
        return f"mutations allowed on workers {sorted(self.workers)}"


@dataclass(frozen=True)
class MutationRule:
    """The run's one answer to "may this call change this target's workers?": `--read-only`
    changes nothing anywhere; a deployment of a targets file is changed only as its own table
    allows (`allow_mutations` with `workers` or `all_workers`); elsewhere `--allow-mutations`
    (with `--worker ID...` or `--all-workers`) changes those workers of every target, and
    without it the suite changes only the fakes it started itself, never a deployment of the
    user's."""

    read_only: bool = False
    granted: MutationPolicy = MutationPolicy()
    own: Mapping[str, MutationPolicy] = field(default_factory=dict)
    """Target id -> the policy of a deployment that says its own (a targets file's table)."""
    sample: WorkerSample = field(default_factory=WorkerSample)
    """The run's judging sample, given with every policy (`MutationPolicy.sample`)."""

    @classmethod
    def from_config(
        cls, config: RunConfig, deployments: Iterable[Deployment] | None = None
    ) -> MutationRule:
        """From the flags and the deployments of the targets file (read from `config` when
        not given)."""
        found = config.deployments() if deployments is None else deployments
        own = {d.target_id: MutationPolicy.of(d) for d in found if d.naming.file}
        return cls(
            read_only=config.read_only,
            granted=MutationPolicy.from_config(config),
            own=own,
            sample=WorkerSample.of(config.worker_sample, config.judge_every_worker),
        )

    def for_target(self, kind: str, target_id: str = "") -> MutationPolicy:
        """The policy for target `target_id` of `kind` (`Target.kind`: "fake" for our own
        fakes), with the run's judging sample."""
        return replace(self._permits(kind, target_id), sample=self.sample)

    def _permits(self, kind: str, target_id: str) -> MutationPolicy:
        if self.read_only:
            return MutationPolicy()
        if target_id in self.own:
            return self.own[target_id]
        if self.granted.allowed or kind != "fake":
            return self.granted
        return MutationPolicy(allowed=True)
