"""How an administration route changes a worker's weights, version and cache.

Shared by every route family (vLLM Python, vLLM sidecar, SGLang) so that the same
update means the same thing everywhere:

* the new weights are *derived from what the update names* (the model path, or the
  transfer payload), so two workers updated from the same checkpoint generate the same
  tokens, and any update changes what generation produces;
* a declared version is metadata: it changes what ``get_weight_version`` and the
  responses report, never the tokens;
* loading weights resets the prefix cache (stale KV state must not survive a refresh);
* a worker started on a checkpoint (``--initial-model-path``) holds the weights an update from
  that path gives (``path_weights``), and one started on none the weights an update from its
  served model name gives (``checkpoint_weights``): a cold start and an update agree.

The control-plane faults that lie about updates are applied here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from fake_backends.model.decoding import ChoiceResult
from fake_backends.runtime.workers import INITIAL_WEIGHTS, EngineWorker

SERVES_A_MIX = "update_serves_a_mix"
NAN_AFTER_UPDATE = "logprobs_nan_after_update"


def path_weights(model_path: str) -> str:
    """The weights tag of a checkpoint on disk: the toy model hashes it into its seed."""
    return f"path:{model_path}"


def checkpoint_weights(worker: EngineWorker, model_path: str) -> str:
    """The weights an update from `model_path` loads on `worker`. A worker started on no
    particular checkpoint serves its model by name, as an engine started on model M serves what
    loading M gives: an update from that name loads the weights it started on (so a run that
    restores a worker to its served model finds it as it was)."""
    if model_path == worker.model_name and worker.initial_weights == INITIAL_WEIGHTS:
        return INITIAL_WEIGHTS
    return path_weights(model_path)


def payload_weights(kind: str, payload: Any) -> str:
    """The weights tag of a transfer (distributed, tensor, IPC): a digest of what was sent."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return f"{kind}:{canonical}"


def mixed_weights(old: str, new: str) -> str:
    """The weights tag of a botched update (``update_serves_a_mix``): part old, part new, so
    neither checkpoint's policy, and unlike both."""
    return f"mix:{old}|{new}"


def declare_version(worker: EngineWorker, version: Any) -> None:
    """Declare a version (``weight_version_unchanged``: silently keep the old one;
    ``version_stuck_after_first``: keep the first one declared)."""
    if worker.runtime.faults.active("weight_version_unchanged"):
        return
    if worker.version_declared and worker.runtime.faults.active("version_stuck_after_first"):
        return
    worker.declare_version(version)


def load_weights(
    worker: EngineWorker,
    tag: str,
    *,
    version: Any = None,
    declare: bool = False,
    reset_cache: bool = True,
) -> None:
    """Swap the weights, declare ``version`` if asked, reset the prefix cache if asked."""
    worker.runtime.updates += 1
    kept = worker.runtime.faults.active("update_keeps_old_weights") or (
        worker.runtime.updates > 1 and worker.runtime.faults.active("update_applied_once")
    )
    if kept:
        pass
    elif worker.runtime.faults.active(SERVES_A_MIX):
        worker.load_weights(mixed_weights(worker.weights_tag, tag))
    else:
        worker.load_weights(tag)
    if declare:
        declare_version(worker, version)
        worker.scheduler_version = None  # a load reaches the scheduler's record
    if reset_cache:
        worker.runtime.flush()


def as_generated(worker: EngineWorker, result: ChoiceResult) -> ChoiceResult:
    """A choice as `worker` reports it (``logprobs_nan_after_update``: once it has loaded new
    weights, every log probability it reports is NaN while its ids stay right, as NeMo RL
    #2180 reports of an update that overlaps generation)."""
    if worker.runtime.updates and worker.runtime.faults.active(NAN_AFTER_UPDATE):
        nan = float("nan")
        return dataclasses.replace(
            result, steps=tuple(step._replace(logprob=nan) for step in result.steps)
        )
    return result
