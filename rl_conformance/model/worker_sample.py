"""Which of the selected workers a control effect is read on where the spec does not ask for
every one: a pause's effect on streams, a held request, a cache flush are each judged on a
sample, since judging them one worker after another grows a night's cost with the fleet. What
the spec asks of every worker ("Verify every worker and run post-update generation before
reopening the fleet") is still read on every one (`each_worker.pins(..., every=True)`).

The sample is deterministic, so two nights judge the same workers of the same fleet: in the
selection's identity order (`admin_steps.by_identity`), the first, the last, and the rest spread
evenly between them. `--worker-sample N` sets its size (default `DEFAULT_SIZE`),
`--judge-every-worker` judges every selected worker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

DEFAULT_SIZE = 4
"""Workers a sampled effect is read on: the first and the last by identity (a fan-out that
stops early, or at its first target, misses the last), and two between."""
HOW = "the first, the last and spread between by identity"
EVERY_FLAG = "--judge-every-worker"
SIZE_FLAG = "--worker-sample"

Worker = TypeVar("Worker")


@dataclass(frozen=True)
class WorkerSample:
    """`size` workers of a selection (None: every one)."""

    size: int | None = None

    @classmethod
    def of(cls, size: int | None, every: bool) -> WorkerSample:
        """The run's sample: `--judge-every-worker` wins over `--worker-sample N`."""
        return cls(None if every else (DEFAULT_SIZE if size is None else size))

    def pick(self, workers: Sequence[Worker]) -> tuple[Worker, ...]:
        """The sampled workers, in `workers`' order: all of them when the sample is as large."""
        count = len(workers)
        if self.size is None or count <= self.size:
            return tuple(workers)
        if self.size == 1:
            return (workers[0],)
        places = sorted({round(i * (count - 1) / (self.size - 1)) for i in range(self.size)})
        return tuple(workers[place] for place in places)

    def judged(
        self, labels: Sequence[str], selected: int, every_for: str | None = None
    ) -> dict[str, object]:
        """The fact a test measures when it judged a sample: which workers, of how many, and
        how they were chosen (matrix.json `tests[].measured.judged_workers`, the cell's
        reason); `every_for`: what the same test judged on every selected worker."""
        fact: dict[str, object] = {
            "judged": list(labels),
            "selected": selected,
            "sampled": f"{HOW}, {SIZE_FLAG} {self.size}, {EVERY_FLAG} judges each",
        }
        if every_for:
            fact["every_worker"] = every_for
        return fact


def sample_note(fact: dict[str, object]) -> str:
    """One phrase for a cell's reason: "judged on 4 of 64 selected workers (sampled: ...)"."""
    judged = fact.get("judged") or []
    names = ", ".join(str(name) for name in judged) if isinstance(judged, list) else ""
    count = len(judged) if isinstance(judged, list) else 0
    every = f"; {fact['every_worker']} on every selected worker" if fact.get("every_worker") else ""
    return (
        f"judged on {count} of {fact.get('selected')} selected workers "
        f"(sampled: {fact.get('sampled')}: {names}){every}"
    )
