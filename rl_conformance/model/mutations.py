"""Which workers a run may change: the run's one rule (`MutationRule`, from its flags) and the
policy it gives each target (`MutationPolicy`), which the admin client asks before every call
that changes a worker."""

from __future__ import annotations

from dataclasses import dataclass

from .config import RunConfig


class MutationRefused(Exception):
    """The run is read-only for this worker; the test is skipped with this reason."""


@dataclass(frozen=True)
class MutationPolicy:
    allowed: bool = False
    workers: frozenset[int] | None = None
    """Instance ids that may be mutated; None means every worker (`--all-workers`)."""

    @classmethod
    def from_config(cls, config: RunConfig) -> MutationPolicy:
        """`--allow-mutations` with `--worker ID...` or `--all-workers` (validated together in
        `RunConfig.validate`)."""
        if not config.allow_mutations:
            return cls()
        return cls(allowed=True, workers=None if config.all_workers else frozenset(config.worker))

    def permits(self, instance_id: int | None) -> bool:
        if not self.allowed:
            return False
        return self.workers is None or instance_id in self.workers

    def refusal(self, what: str) -> MutationRefused:
        """Why `what` is not sent, naming the flags that would allow it."""
        return MutationRefused(
            f"{self.describe()}: {what} not sent "
            "(use --allow-mutations with --worker ID or --all-workers)"
        )

    def describe(self) -> str:
        if not self.allowed:
            return "read-only run"
        if self.workers is None:
            return "mutations allowed on every worker"
        return f"mutations allowed on workers {sorted(self.workers)}"


@dataclass(frozen=True)
class MutationRule:
    """The run's one answer to "may this call change this target's workers?", from its flags:
    `--read-only` changes nothing anywhere; `--allow-mutations` (with `--worker ID...` or
    `--all-workers`) changes those workers of every target; without either, the suite changes
    only the fakes it started itself, never a deployment of the user's."""

    read_only: bool = False
    granted: MutationPolicy = MutationPolicy()

    @classmethod
    def from_config(cls, config: RunConfig) -> MutationRule:
        return cls(read_only=config.read_only, granted=MutationPolicy.from_config(config))

    def for_target(self, kind: str) -> MutationPolicy:
        """The policy for a target of `kind` (`Target.kind`: "fake" for our own fakes)."""
        if self.read_only:
            return MutationPolicy()
        if self.granted.allowed or kind != "fake":
            return self.granted
        return MutationPolicy(allowed=True)
