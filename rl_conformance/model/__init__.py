"""The model layer: what a run is about and what it found: releases, the run configuration,
capabilities, targets, verdicts, the matrix, its journal, baselines, the kill matrix.

Submodules are imported by name; this package imports none of them, so that importing one
module never loads the rest."""

__all__ = [
    "baseline",
    "capabilities",
    "config",
    "journal",
    "killmatrix",
    "matrix",
    "prompts",
    "provenance",
    "releases",
    "strategies",
    "target",
    "verdict",
    "weight_transfer",
]
