"""JSON text and float rendering, the way the real frontend writes them.

Why not ``json.dumps`` defaults or Starlette's ``JSONResponse``: the fake must be able
to emit a bare ``NaN`` token (a fault), big integers exactly (instance ids above 2**53),
and the compact separators Dynamo's serde output uses.  Dynamo also re-encodes logprobs
as 32-bit floats and prints them in two ways (CONTRACT-NOTES §O6.1): the shortest
decimal of the f32, or the f32 widened to f64.  Both renderings are provided here.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=True)


def _c_encoder() -> Callable[[Any, int], Sequence[str]] | None:
    """The C encoder ``_ENCODER`` builds on every call, built once (no circular-reference
    check: the fake never writes a circular object); None where the C accelerator is missing
    or does not answer as ``_ENCODER`` does."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        encoder: Callable[[Any, int], Sequence[str]] = make(
            None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",",
            False, False, True,
        )  # fmt: skip
        sample = {"a": [1, 2.5, None, True, float("nan"), 2**70], "é": "x\n\u2028"}
        if "".join(encoder(sample, 0)) != _ENCODER.encode(sample):
            return None
    except Exception:  # pragma: no cover - an interpreter whose accelerator differs
        return None
    return encoder


_C_ENCODE = _c_encoder()


def dumps(obj: Any) -> str:
    """Compact JSON; NaN/Infinity are written as bare tokens, non-ASCII as UTF-8.

    ``json.dumps`` with these options, without building an encoder per call."""
    if _C_ENCODE is not None:
        return "".join(_C_ENCODE(obj, 0))
    return _ENCODER.encode(obj)


def f32_widened(value: float) -> float:
    """The value rounded to f32 and printed as an f64 (``-1.120674967765808``)."""
    if not math.isfinite(value):
        return value
    result: float = struct.unpack("<f", struct.pack("<f", value))[0]
    return result


def f32_shortest(value: float) -> float:
    """The value rounded to f32 and printed with the fewest digits (``-1.120675``)."""
    if not math.isfinite(value):
        return value
    target = f32_widened(value)
    for digits in range(1, 10):
        candidate = float(f"{target:.{digits}g}")
        if f32_widened(candidate) == target:
            return candidate
    return target  # pragma: no cover - 9 significant digits always round-trip an f32
