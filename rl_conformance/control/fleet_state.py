"""A selected worker's state as the run found it, before its first mutating call: paused or not
(where its family reports it), its weight version and served model path (where reported), and
the greedy answer, with log probabilities, of a generation pinned to it.

The answer is what tells the weights the run leaves a worker on from the weights it found there:
a label (a version, a path) may be restored without the tensors, and an output that merely
looks the same proves nothing. Two answers of one worker are judged with the served-policy
tolerance (`checks.served_policy`), at the serving precision of a half-precision fleet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..checks.served_policy import (
    PolicyReference,
    ServedProbe,
    disagreement,
    serving_tolerance,
)
from ..client.http import Client
from ..model.target import Target
from ..wire.exchange import Exchange
from .admin import AdminClient, AdminWorker
from .families import VLLM_SIDECAR, AdminFamily
from .refresh import completion_ids, pinned_generation, reported_version

PROBE_PROMPT = (640, 1024, 777)
"""The ids the suite's readiness generation sends (the two ends of the ids its prompts use)."""
PROBE_TOKENS = 8
READ_DEADLINE_S = 10.0
FOUND = "the weights found before the run"
SERVING_DTYPE = "bfloat16"
"""Two answers of one worker are held to the tolerance of the coarsest precision a fleet serves
in: a batch that differs between the two may round differently, the weights may not."""
DISCOVERY_MODEL = "discovery's model"
"""The source of a model path read from discovery's served model name: a checkpoint path only
where the engine serves its --model argument as its name (an absolute path)."""


@dataclass
class WorkerState:
    """What a worker reported of itself at one moment (None: not reported, with the reason)."""

    label: str
    system_url: str
    instance_id: int | None
    family: str | None
    paused: bool | None = None
    paused_source: str = ""
    weight_version: Any = None
    version_source: str = ""
    model_path: str | None = None
    model_path_source: str = ""
    probe: PolicyReference | None = None
    probe_note: str = ""

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "paused": self.paused,
            "weight_version": self.weight_version,
            "model_path": self.model_path,
        }
        sources = {
            "paused": self.paused_source,
            "weight_version": self.version_source,
            "model_path": self.model_path_source,
        }
        document["sources"] = {key: value for key, value in sources.items() if value}
        if self.probe is not None:
            document["probe_ids"] = list(self.probe.completion_ids)
        elif self.probe_note:
            document["probe"] = self.probe_note
        return document


def observe(
    admin: AdminClient,
    target: Target,
    worker: AdminWorker,
    family: AdminFamily | None,
    *,
    probe: bool = True,
) -> WorkerState:
    """The worker's state through read-only routes and discovery alone, and (with `probe`) its
    pinned greedy answer. Nothing here mutates, and nothing raises: an unanswered read leaves
    its field unreported."""
    state = WorkerState(
        worker.label, worker.system_url or "", worker.instance_id, family and family.name
    )
    if family is VLLM_SIDECAR:
        body = _read(admin, worker, "control/is_paused")
        if isinstance(body, Mapping) and isinstance(body.get("is_paused"), bool):
            state.paused, state.paused_source = body["is_paused"], "control/is_paused"
    if family is not None and family.version:
        version = family.read_version(_read(admin, worker, family.version))
        if version is not None:
            state.weight_version, state.version_source = version, family.version
    for route in family.info_routes if family is not None else ():
        body = _read(admin, worker, route)
        if not isinstance(body, Mapping):
            continue
        if state.version_source == "" and family.info_version_key in body:
            state.weight_version = body[family.info_version_key]
            state.version_source = route
        if isinstance(body.get("model_path"), str) and body["model_path"]:
            state.model_path, state.model_path_source = body["model_path"], route
        break
    if state.model_path is None and worker.model:
        state.model_path, state.model_path_source = worker.model, DISCOVERY_MODEL
    if probe:
        state.probe, state.probe_note, exchange = probe_answer(admin.client, target, worker)
        version = reported_version(exchange) if exchange is not None else None
        if state.version_source == "" and version is not None:
            state.weight_version, state.version_source = version, "nvext.engine_data"
    return state


def probe_answer(
    client: Client, target: Target, worker: AdminWorker
) -> tuple[PolicyReference | None, str, Exchange | None]:
    """The worker's greedy answer to the fixed probe, with each step's lead over the runner-up
    and the prompt tokens' log probabilities where the deployment returns them; None and why
    when it gave no usable answer."""
    try:
        exchange = pinned_generation(
            client,
            target,
            worker,
            list(PROBE_PROMPT),
            max_tokens=PROBE_TOKENS,
            deadline_s=READ_DEADLINE_S * 3,
            logprobs=2,
            prompt_logprobs=0,
            extra_fields=("completion_token_ids", "prompt_logprobs", "engine_data"),
        )
    except Exception as exc:  # a budget refusal, a transport error: say so, go on
        return None, f"the pinned generation was not sent ({exc})", None
    ids = completion_ids(exchange)
    try:
        body = exchange.json()
        logprobs = body["choices"][0]["logprobs"]
        selected = tuple(float(value) for value in logprobs["token_logprobs"])
    except (ValueError, KeyError, IndexError, TypeError):
        return (
            None,
            f"the pinned generation gave no log probabilities (HTTP {exchange.status})",
            (exchange),
        )
    if ids is None or len(ids) != len(selected) or not ids:
        return None, "the pinned generation gave no completion_token_ids", exchange
    tops = logprobs.get("top_logprobs") or []
    margins = tuple(_margin(tops[i] if i < len(tops) else None) for i in range(len(ids)))
    listed = (body.get("nvext") or {}).get("prompt_logprobs")
    prompt: tuple[float | None, ...] = ()
    if isinstance(listed, list) and len(listed) == len(PROBE_PROMPT):
        prompt = tuple(
            _prompt_logprob(entry, token) for entry, token in zip(listed, PROBE_PROMPT, strict=True)
        )
    reference = PolicyReference(
        checkpoint=FOUND,
        prompt=PROBE_PROMPT,
        completion_ids=tuple(int(token) for token in ids),
        completion_logprobs=selected,
        margins=margins,
        prompt_logprobs=prompt,
        dtype=SERVING_DTYPE,
    )
    return reference, "", exchange


def same_weights(found: PolicyReference, now: PolicyReference) -> tuple[bool, str]:
    """Whether the answer `now` agrees with the answer `found` at every position within the
    serving tolerance, and the first position where it does not."""
    tolerance = serving_tolerance(SERVING_DTYPE)
    probe = ServedProbe(now.completion_ids, now.completion_logprobs, now.prompt_logprobs or None)
    found_there = found if now.prompt_logprobs else _without_prompt(found)
    violation = disagreement(probe, found_there, tolerance)
    if violation is None:
        return True, f"the pinned probe agrees with {FOUND} ({tolerance.stated})"
    return False, (
        f"{violation.message} ({tolerance.stated}): {violation.field} expected "
        f"{violation.expected}, observed {violation.observed}"
    )


def _without_prompt(reference: PolicyReference) -> PolicyReference:
    from dataclasses import replace

    return replace(reference, prompt_logprobs=(), prompt_scales=())


def _read(admin: AdminClient, worker: AdminWorker, route: str) -> Any:
    """A read-only route's reply, or None (not served, not advertised, not answered)."""
    if worker.routes is not None and route not in worker.routes:
        return None
    try:
        exchange = admin.call(worker, route, {}, deadline_s=READ_DEADLINE_S)
    except Exception:  # not advertised, refused: the field stays unreported
        return None
    return exchange.reply() if exchange.status == 200 else None


def _margin(top: Any) -> float:
    """The greedy choice's lead over the runner-up; 0 (a near-tie, judged no further) when the
    alternatives do not tell."""
    if not isinstance(top, Mapping):
        return 0.0
    values = sorted((float(value) for value in top.values()), reverse=True)
    return values[0] - values[1] if len(values) >= 2 else 0.0


def _prompt_logprob(entry: Any, token: int) -> float | None:
    if not isinstance(entry, Mapping):
        return None
    found = (entry.get(str(token)) or {}).get("logprob")
    return float(found) if isinstance(found, int | float) else None
