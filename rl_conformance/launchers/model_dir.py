"""What a model directory says about the model that a deployment never tells its clients."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _ids(value: Any) -> set[int]:
    values = value if isinstance(value, list) else [value]
    return {v for v in values if type(v) is int and v >= 0}


def _tokenizer_eos(directory: Path) -> set[int]:
    """The tokenizer's `eos_token`, looked up among `tokenizer.json`'s added tokens."""
    config = _read(directory / "tokenizer_config.json")
    eos = config.get("eos_token") if isinstance(config, dict) else None
    if isinstance(eos, dict):
        eos = eos.get("content")
    tokenizer = _read(directory / "tokenizer.json")
    added = tokenizer.get("added_tokens") if isinstance(tokenizer, dict) else None
    if not isinstance(eos, str) or not isinstance(added, list):
        return set()
    return {
        token["id"]
        for token in added
        if isinstance(token, dict) and token.get("content") == eos and type(token.get("id")) is int
    }


def eos_token_ids(directory: Path) -> tuple[int, ...]:
    """The model's end-of-sequence ids, as the engines gather them: `eos_token_id` of
    `config.json` and of `generation_config.json` (what Dynamo's frontend turns into the
    request's hidden stop ids), and the tokenizer's `eos_token`; () when none is readable."""
    found: set[int] = set()
    for name in ("config.json", "generation_config.json"):
        document = _read(directory / name)
        if isinstance(document, dict):
            found |= _ids(document.get("eos_token_id"))
    return tuple(sorted(found | _tokenizer_eos(directory)))
