"""Where the new weights of a test's updates come from, per target and family.

A Python vLLM or SGLang worker loads a checkpoint from disk (`--update-model-path`, given twice so
consecutive updates alternate and really change the weights); a native-sidecar worker receives a
transfer (`--weight-transfer FILE`, likewise alternated). Our fakes derive toy weights from any
path or payload, so against them the suite makes its own. Everything refuses when called, not
when built, so a test first reports what it can observe without mutating.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ..model.mutations import MutationPolicy
from ..model.target import Target
from ..model.verdict import MissingInput
from ..model.weight_transfer import WeightTransfer
from .admin import AdminWorker
from .families import SYNTHETIC_WEIGHTS, AdminFamily, NewWeights, new_version

_T = TypeVar("_T")


def synthetic_path(version: str) -> str:
    """The made-up checkpoint path of a synthetic update (our fakes derive weights from it)."""
    return f"{SYNTHETIC_WEIGHTS}/{version}"


def synthetic_allowed(target: Target) -> bool:
    """Our fakes (launched, or our engine behind the real Dynamo) accept made-up weights."""
    return target.kind == "fake" or target.versions.get("engine") in ("fake-vllm", "fake-sglang")


@dataclass
class WeightSource:
    policy: MutationPolicy
    target: Target
    model_paths: tuple[str, ...] = ()
    transfers: tuple[WeightTransfer, ...] = ()
    counter: Iterator[int] = field(default_factory=itertools.count)
    initialised: set[str] = field(default_factory=set)
    """Workers whose transfer engine this run has initialised (keyed by URL)."""
    held: dict[str, str] = field(default_factory=dict)
    """The checkpoint each worker (keyed by URL) last loaded in this run (`loaded`)."""

    def new(
        self,
        family: AdminFamily,
        workers: Sequence[AdminWorker] = (),
        avoid: Collection[str | None] = (),
    ) -> NewWeights:
        """The next policy for `family`, or the refusal/missing input that prevents one. Given
        the `workers` it is for, a checkpoint none of them holds is preferred (tests that update
        one worker leave the fleet on different checkpoints; an update to the checkpoint a
        worker already holds changes nothing there), and before that one not in `avoid` (what
        the workers held when a test took its baseline: two updates in a row must not return to
        it)."""
        self.require(family)
        version = new_version()
        if family.update_kind == "transfer":
            if self.transfers:
                return NewWeights(version, transfer=self._next(self.transfers))
            return NewWeights(version, transfer=WeightTransfer.synthetic(version))
        if self.model_paths:
            holding = {self.held.get(_key(worker)) for worker in workers}
            start = next(self.counter)
            count = len(self.model_paths)
            order = [self.model_paths[(start + step) % count] for step in range(count)]
            path = next(
                (
                    candidate
                    for wanted in (
                        lambda c: c not in avoid and c not in holding,
                        lambda c: c not in avoid,
                        lambda c: c not in holding,
                    )
                    for candidate in order
                    if wanted(candidate)
                ),
                order[0],
            )
            return NewWeights(version, model_path=path)
        if synthetic_allowed(self.target):
            # The path `AdminFamily.update_calls` sends: named, so a reference can start on it;
            # numbered, so a run's made-up checkpoints (and the kill matrix) are the same each time.
            return NewWeights(version, model_path=synthetic_path(f"update-{next(self.counter)}"))
        return NewWeights(version)

    def require(self, family: AdminFamily) -> None:
        """Raise what would prevent an update of `family` (before anything is paused)."""
        if not self.policy.allowed:
            raise self.policy.refusal("weight updates")
        if synthetic_allowed(self.target):
            return
        if family.update_kind == "transfer" and not self.transfers:
            raise MissingInput(
                "weight updates on a native-sidecar worker are transfers from a trainer: "
                "describe one with --weight-transfer FILE (twice, so consecutive updates differ)"
            )
        if family.update_kind == "disk" and not self.model_paths:
            raise MissingInput(
                "weight updates on this deployment need real checkpoints: give "
                "--update-model-path PATH twice"
            )

    def needs_setup(self, worker: AdminWorker) -> bool:
        """Whether this worker's transfer engine has not been initialised by this run."""
        return _key(worker) not in self.initialised

    def setup_done(self, worker: AdminWorker) -> None:
        self.initialised.add(_key(worker))

    def loaded(self, workers: Sequence[AdminWorker], weights: NewWeights) -> None:
        """These workers answered success to an update from `weights`."""
        if weights.model_path is not None:
            for worker in workers:
                self.held[_key(worker)] = weights.model_path

    def replaced(self, workers: Sequence[AdminWorker]) -> None:
        """These workers took weights from no checkpoint (a distributed update): what they hold
        is unknown to the run again."""
        for worker in workers:
            self.held.pop(_key(worker), None)

    def holding(self, workers: Sequence[AdminWorker]) -> set[str | None]:
        """The checkpoints these workers were last sent by this run (None: not sent one)."""
        return {self.held.get(_key(worker)) for worker in workers}

    def _next(self, choices: tuple[_T, ...]) -> _T:
        return choices[next(self.counter) % len(choices)]


def _key(worker: AdminWorker) -> str:
    return worker.system_url or worker.label
