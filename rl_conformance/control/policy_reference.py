"""The policy a checkpoint defines, computed from the checkpoint itself: the reference that
`refresh.served_policy_verified` holds a refreshed worker to.

Two kinds of reference:

- from the checkpoint's files: the harness does not depend on torch, so the reference is computed
  by `engine_side/reference_policy.py` in a Python that has torch and transformers
  (`--reference-python`, else the environment `rl-conformance install-vllm` made), on a checkpoint
  directory readable where the suite runs (`--reference-checkpoint`, else the
  `--update-model-path` itself);
- a cold start on the checkpoint: the same deployment type started fresh on it answers the same
  probe (the `cold_start` channel of a deployment the suite launched: our fakes, whose
  checkpoints are names no file holds).

Without either, the test is `skipped` naming the flags: never a failure of the deployment.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..checks.served_policy import PolicyReference
from ..engine_side import REFERENCE_POLICY
from ..errors import LaunchError
from ..model.target import COLD_START, OFFERED_BY, ColdStartProbe, Probe
from ..model.verdict import MissingInput

__all__ = ["PolicyReference", "ReferenceSource", "compute", "from_cold_start"]

REFERENCE_TIMEOUT_S = 300.0
PYTHON_ENV = "RL_CONFORMANCE_REFERENCE_PYTHON"


@dataclass
class ReferenceSource:
    """Where references come from in one run; each checkpoint's reference is computed once."""

    python: Path | None
    local_checkpoints: dict[str, Path]
    """The deployment's checkpoint path -> a readable copy here (`--reference-checkpoint`)."""
    cache: dict[tuple[str, tuple[int, ...], int], PolicyReference]
    probe: Probe | None = field(default=None, repr=False)
    """The target's fake-only channels: a cold start on a checkpoint when it offers one."""

    @classmethod
    def build(
        cls,
        python: str | None,
        update_paths: Sequence[str],
        reference_checkpoints: Sequence[str],
        fallback_python: Path | None = None,
        probe: Probe | None = None,
    ) -> ReferenceSource:
        chosen = python or os.environ.get(PYTHON_ENV)
        located = Path(chosen) if chosen else fallback_python
        local = {
            path: Path(copy)
            for path, copy in zip(update_paths, reference_checkpoints, strict=False)
        }
        return cls(located, local, {}, probe)

    def checkpoint_here(self, deployment_path: str) -> Path:
        """The readable copy of the checkpoint the deployment was told to load."""
        local = self.local_checkpoints.get(deployment_path, Path(deployment_path))
        if not (local / "config.json").is_file():
            raise MissingInput(
                f"the checkpoint {deployment_path!r} is not readable here ({local}/config.json "
                "is missing): give its local copy with --reference-checkpoint PATH (one per "
                "--update-model-path, in the same order)" + _OR_COLD_START
            )
        return local

    @property
    def cold_start(self) -> ColdStartProbe | None:
        """The probe, when it offers a cold start on a checkpoint."""
        if self.probe is None or COLD_START not in self.probe.offers:
            return None
        return cast(ColdStartProbe, self.probe)

    def local_inputs(self, deployment_path: str) -> tuple[Path, Path]:
        """The readable checkpoint and the reference Python, or `MissingInput` naming the flag."""
        local = self.checkpoint_here(deployment_path)
        if self.python is None or not self.python.exists():
            raise MissingInput(
                "a reference for the served policy needs a Python with torch and transformers: "
                "give --reference-python PATH (or run `rl-conformance install-vllm`)"
                + _OR_COLD_START
            )
        return local, self.python

    def reference(
        self, deployment_path: str, prompt: Sequence[int], tokens: int
    ) -> PolicyReference:
        """From the checkpoint's files when they are readable here and a reference Python is
        at hand; else from a cold start on it, when the target offers one; else `MissingInput`
        naming the flags and the channel."""
        try:
            local, python = self.local_inputs(deployment_path)
        except MissingInput:
            cold_start = self.cold_start
            if cold_start is None:
                raise
            return self._from_cold_start(cold_start, deployment_path, prompt, tokens)
        key = (str(local.resolve()), tuple(prompt), tokens)
        if key not in self.cache:
            self.cache[key] = compute(python, local, prompt, tokens)
        return self.cache[key]

    def _from_cold_start(
        self, probe: ColdStartProbe, deployment_path: str, prompt: Sequence[int], tokens: int
    ) -> PolicyReference:
        key = (f"{COLD_START}:{deployment_path}", tuple(prompt), tokens)
        if key not in self.cache:
            answer = probe.cold_start_probe(deployment_path, cold_start_body(prompt, tokens))
            self.cache[key] = from_cold_start(deployment_path, prompt, tokens, answer)
        return self.cache[key]


_OR_COLD_START = (
    f"; or judge it on a deployment the suite launches ({', '.join(OFFERED_BY[COLD_START])}), "
    "whose reference is the same deployment started again, fresh, on the checkpoint"
)
REFERENCE_TOP = 2
"""Alternatives asked of a cold start per position: the runner-up gives each greedy margin."""


def cold_start_body(prompt: Sequence[int], tokens: int) -> dict[str, Any]:
    """The probe a cold start answers: the served probe's, with the top two alternatives."""
    return {
        "prompt": list(prompt),
        "max_tokens": tokens,
        "temperature": 0,
        "ignore_eos": True,
        "logprobs": REFERENCE_TOP,
        "prompt_logprobs": 0,
        "nvext": {"extra_fields": ["completion_token_ids", "prompt_logprobs"]},
    }


def from_cold_start(
    checkpoint: str, prompt: Sequence[int], tokens: int, answer: Mapping[str, Any]
) -> PolicyReference:
    """The reference a cold start's answer to `cold_start_body` gives: its greedy ids, their log
    probabilities, each one's lead over the runner-up, and the prompt tokens' log
    probabilities; `LaunchError` when the answer lacks any of them."""
    try:
        choice = answer["choices"][0]
        ids = tuple(int(token) for token in answer["nvext"]["completion_token_ids"])
        selected = tuple(float(value) for value in choice["logprobs"]["token_logprobs"])
        tops = choice["logprobs"]["top_logprobs"]
        listed = answer["nvext"]["prompt_logprobs"]
        if len(ids) != tokens or len(selected) != tokens or len(tops) != tokens:
            raise ValueError(f"{len(ids)} ids, {len(selected)} logprobs for {tokens} tokens")
        if len(listed) != len(prompt):
            raise ValueError(f"{len(listed)} prompt logprobs for {len(prompt)} prompt tokens")
        margins = tuple(_margin(top) for top in tops)
        prompt_logprobs = tuple(
            _prompt_logprob(entry, token) for entry, token in zip(listed, prompt, strict=True)
        )
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise LaunchError(
            f"the cold start on {checkpoint} gave no usable reference ({exc}): "
            f"{json.dumps(answer)[:500]}"
        ) from exc
    return PolicyReference(
        checkpoint=f"{checkpoint} (cold start)",
        prompt=tuple(prompt),
        completion_ids=ids,
        completion_logprobs=selected,
        margins=margins,
        prompt_logprobs=prompt_logprobs,
        same_engine=True,
    )


def _margin(top: Mapping[str, Any]) -> float:
    """The greedy choice's lead over the runner-up; 0 (a near-tie: judged no further) when the
    alternatives cannot tell (fewer than two listed, as when two tokens share a text)."""
    values = sorted((float(value) for value in top.values()), reverse=True)
    return values[0] - values[1] if len(values) >= 2 else 0.0


def _prompt_logprob(entry: Any, token: int) -> float | None:
    if entry is None:
        return None
    found = entry[str(token)]["logprob"]
    return float(found)


def compute(python: Path, checkpoint: Path, prompt: Sequence[int], tokens: int) -> PolicyReference:
    command = [
        str(python),
        str(REFERENCE_POLICY),
        str(checkpoint),
        "--prompt",
        ",".join(str(token) for token in prompt),
        "--tokens",
        str(tokens),
    ]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="0")
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
            timeout=REFERENCE_TIMEOUT_S,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise LaunchError(
            f"the reference for {checkpoint} was not computed within {REFERENCE_TIMEOUT_S:g} s"
        ) from exc
    if done.returncode != 0:
        if "No module named" in done.stderr:
            raise MissingInput(
                f"{python} cannot compute a reference ({done.stderr.strip().splitlines()[-1]}): "
                "give --reference-python PATH, a Python with torch and transformers"
            )
        raise LaunchError(
            f"the reference for {checkpoint} failed (exit {done.returncode}):\n"
            f"{done.stderr[-2000:]}"
        )
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
        return PolicyReference(
            checkpoint=str(found["checkpoint"]),
            prompt=tuple(found["prompt"]),
            completion_ids=tuple(found["completion_ids"]),
            completion_logprobs=tuple(found["completion_logprobs"]),
            margins=tuple(found["margins"]),
            prompt_logprobs=tuple(found["prompt_logprobs"]),
            completion_scales=tuple(found["completion_scales"]),
            prompt_scales=tuple(found["prompt_scales"]),
            dtype=str(found.get("dtype") or "float32"),
        )
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise LaunchError(
            f"the reference for {checkpoint} printed no reference document: {done.stdout[-500:]!r}"
        ) from exc
