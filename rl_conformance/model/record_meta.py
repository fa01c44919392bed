"""What only the user knows of a run (`--record-meta FILE`): framework commits, image and digest,
CUDA and driver, model revisions, hardware, topology, owners. The file is a JSON object shaped
like a `dynamo.rl.validation.v1` record, holding only those fields; each is checked here and a
wrong one is refused naming the field, the expected and the observed value. Gates, the run's
times and commands and the record's state are measured, never given. A value the deployment
showed (its backend version, whether serving is disaggregated) stands over the file's, and the
difference is listed in the record's limitations."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError

COMMIT = re.compile(r"[0-9a-f]{40}")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")

Rule = Callable[[Any], str | None]
"""A value -> None when acceptable, else what was expected."""


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) else "a string"


def _pattern(pattern: re.Pattern[str], what: str) -> Rule:
    def rule(value: Any) -> str | None:
        ok = isinstance(value, str) and (value == "" or pattern.fullmatch(value) is not None)
        return None if ok else what

    return rule


def _positive(value: Any) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return None if ok else "an integer >= 1"


def _one_of(*choices: str) -> Rule:
    def rule(value: Any) -> str | None:
        return None if value in choices else f"one of {', '.join(choices)}"

    return rule


def _strings(value: Any) -> str | None:
    ok = isinstance(value, list) and all(isinstance(item, str) and item for item in value)
    return None if ok else "a list of non-empty strings"


_COMMIT = _pattern(COMMIT, "a full lowercase 40-hex commit SHA")
_PARALLELISM = {"tp": _positive, "pp": _positive, "dp": _positive, "ep": _positive}

FIELDS: dict[str, Any] = {
    "record_id": _text,
    "framework": {
        "name": _text,
        "integration_artifact": _text,
        "recipe_commit": _COMMIT,
        "core_commit": _COMMIT,
    },
    "environment": {
        "dynamo_commit": _COMMIT,
        "backend": {"version": _text},
        "container_image": _text,
        "container_image_digest": _pattern(DIGEST, "an immutable digest sha256:<64 hex>"),
        "cuda_version": _text,
        "driver_version": _text,
        "model": {"name": _text, "revision": _text, "tokenizer_revision": _text},
        "artifacts": _strings,
    },
    "hardware": {
        "nodes": _positive,
        "gpu_model": _text,
        "gpus_per_node": _positive,
        "interconnect": _text,
        "network": _text,
        "artifacts": _strings,
    },
    "topology": {
        "placement": _one_of("colocated", "external"),
        "serving_mode": _one_of("aggregated", "disaggregated"),
        "trainer_parallelism": _PARALLELISM,
        "rollout_parallelism": _PARALLELISM,
    },
    "owners": {"framework": _text, "dynamo": _text, "clean_room_reviewer": _text},
    "limitations": _strings,
}
MEASURED = ("schema", "record_state", "gates", "run", "last_validated")
USER_ONLY = (
    "framework.name",
    "framework.integration_artifact",
    "framework.recipe_commit",
    "framework.core_commit",
    "environment.dynamo_commit",
    "environment.backend.version",
    "environment.container_image",
    "environment.container_image_digest",
    "environment.cuda_version",
    "environment.driver_version",
    "environment.model.revision",
    "environment.model.tokenizer_revision",
    "hardware.nodes",
    "hardware.gpu_model",
    "hardware.gpus_per_node",
    "hardware.interconnect",
    "hardware.network",
    "topology.placement",
    "topology.serving_mode",
    "topology.trainer_parallelism",
    "topology.rollout_parallelism",
    "owners.framework",
    "owners.dynamo",
    "owners.clean_room_reviewer",
)
OBSERVED_WINS = ("environment.backend.version", "topology.serving_mode")


def _check(value: Any, shape: Any, where: str, source: str) -> None:
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            raise ConfigurationError(
                f"{source}: {where or 'the file'}: expected an object, observed {value!r}"
            )
        for key, child in value.items():
            here = f"{where}.{key}" if where else key
            if not where and key in MEASURED:
                raise ConfigurationError(
                    f"{source}: {key}: measured by the run, never given (remove it)"
                )
            if key not in shape:
                raise ConfigurationError(
                    f"{source}: {here}: not a field the user records; expected one of "
                    f"{', '.join(sorted(shape))}"
                )
            _check(child, shape[key], here, source)
        return
    expected = shape(value)
    if expected is not None:
        raise ConfigurationError(f"{source}: {where}: expected {expected}, observed {value!r}")


def check_record_meta(document: Any, source: str = "--record-meta") -> dict[str, Any]:
    _check(document, FIELDS, "", source)
    return dict(document)


def load_record_meta(path: Path) -> dict[str, Any]:
    source = f"--record-meta {path}"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"{source}: cannot read it ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise ConfigurationError(f"{source}: not JSON ({exc})") from exc
    return check_record_meta(document, source)


def _get(document: Mapping[str, Any], dotted: str) -> Any:
    value: Any = document
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _set(document: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        document = document.setdefault(part, {})
    document[last] = value


def _empty(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_empty(item) for item in value.values())
    return value in ("", 0, None, [])


def _leaves(document: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    found = []
    for key, value in document.items():
        here = f"{prefix}.{key}" if prefix else key
        if isinstance(value, Mapping):
            found += _leaves(value, here)
        else:
            found.append((here, value))
    return found


def merged(measured: Mapping[str, Any], meta: Mapping[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The record with the user's fields laid over the measured one, and the user-only fields
    still empty (the record says it is incomplete there)."""
    record = copy.deepcopy(dict(measured))
    notes = []
    for dotted, value in _leaves(meta):
        if dotted in ("environment.artifacts", "hardware.artifacts", "limitations"):
            _set(record, dotted, [*(_get(record, dotted) or []), *value])
            continue
        observed = _get(record, dotted)
        if dotted in OBSERVED_WINS and not _empty(observed) and observed != value:
            notes.append(
                f"{dotted}: the deployment showed {observed!r}; --record-meta said {value!r}, "
                "which is not recorded"
            )
            continue
        _set(record, dotted, value)
    record["limitations"] = [*record.get("limitations", []), *notes]
    given = {dotted for dotted, _ in _leaves(meta)}
    enums = ("topology.placement", "topology.serving_mode")
    defaulted = {d for d in USER_ONLY if d not in enums and _empty(_get(record, d))}
    return record, defaulted | {d for d in enums if d not in given}
