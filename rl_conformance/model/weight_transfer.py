"""A weight transfer for native-sidecar workers, as the user describes it in a file.

The native vLLM sidecar applies new weights by a transfer from a trainer process
(`update/init_weight_transfer_engine`, `start_weight_update`, `update_weights`,
`finish_weight_update`), not from a path on disk. The suite is not a trainer: against a real
sidecar it can only drive a transfer the user describes (`--weight-transfer FILE`), e.g. one whose
other end a test rig provides. The file is a JSON object:

    {"init_info": {...}, "update_info": [{...}, ...]}

`init_info` is sent once per worker to `init_weight_transfer_engine`; each `update_info` object is
one `update_weights` call between `start_weight_update` and `finish_weight_update`. Both are
passed through verbatim: their contents belong to the engine's transfer backend.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError


@dataclass(frozen=True)
class WeightTransfer:
    init_info: dict[str, Any]
    update_info: tuple[dict[str, Any], ...]

    @classmethod
    def synthetic(cls, version: str) -> WeightTransfer:
        """A transfer our fakes accept: they derive toy weights from whatever payload arrives, so
        a payload naming the version gives every update new weights."""
        return cls(
            {"backend": "conformance-synthetic"},
            ({"names": [f"conformance.{version}"], "dtype_names": ["float32"], "shapes": [[1]]},),
        )


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def parse_weight_transfer(document: Any, source: str) -> WeightTransfer:
    """The transfer a parsed JSON document describes, or `ConfigurationError` naming the field,
    the expected and the observed value."""
    if not isinstance(document, dict):
        raise ConfigurationError(
            f"{source}: expected a JSON object with init_info and update_info, "
            f"observed {_type_name(document)}"
        )
    unknown = sorted(set(document) - {"init_info", "update_info"})
    if unknown:
        raise ConfigurationError(
            f"{source}: unknown field(s) {unknown}; expected only init_info and update_info"
        )
    init_info = document.get("init_info")
    if not isinstance(init_info, dict):
        raise ConfigurationError(
            f"{source}: init_info: expected an object, observed {_type_name(init_info)}"
        )
    updates = document.get("update_info")
    if not isinstance(updates, list) or not updates:
        observed = "an empty list" if updates == [] else _type_name(updates)
        raise ConfigurationError(
            f"{source}: update_info: expected a non-empty list of objects, observed {observed}"
        )
    for index, update in enumerate(updates):
        if not isinstance(update, dict):
            raise ConfigurationError(
                f"{source}: update_info[{index}]: expected an object (the sidecar rejects "
                f"lists), observed {_type_name(update)}"
            )
    return WeightTransfer(init_info, tuple(updates))


def load_weight_transfer(path: str, given_by: str = "--weight-transfer") -> WeightTransfer:
    """The transfer the file at `path` describes; `given_by` names the flag (or the targets
    file's key) in messages."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"{given_by} {path}: cannot be read: {exc}") from exc
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{given_by} {path}: not JSON: {exc}") from exc
    return parse_weight_transfer(document, f"{given_by} {path}")
