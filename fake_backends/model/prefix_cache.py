"""A worker's prefix (KV) cache, reduced to what a client can observe: cached_tokens.

Why model it at all: "invalidate stale KV state" is a step of every policy refresh, and a
suite can only check it if the cache is observable.  Real engines report, per request,
how many prompt tokens they could reuse (``usage.prompt_tokens_details.cached_tokens``);
so does this cache.  Like vLLM's, it works on fixed-size blocks whose identity chains over
everything before them: a block is reused only if the whole prefix up to it was served
before on the same worker (and no flush or weight update happened since).

Standard library only: the toy worker that runs inside the real Dynamo's environment
(``dynamo_engine``) uses this cache too.
"""

from __future__ import annotations

import hashlib
import struct
import threading
from collections.abc import Sequence

BLOCK_SIZE = 16
_BLOCK = struct.Struct(f"<{BLOCK_SIZE}I")


def _block_keys(ids: Sequence[int]) -> list[bytes]:
    """One chained key per full block of ``ids``."""
    keys: list[bytes] = []
    previous = b""
    for start in range(0, len(ids) - BLOCK_SIZE + 1, BLOCK_SIZE):
        block = ids[start : start + BLOCK_SIZE]
        previous = hashlib.blake2b(previous + _BLOCK.pack(*block), digest_size=16).digest()
        keys.append(previous)
    return keys


class PrefixCache:
    """The set of blocks a worker has served; safe to read from another thread."""

    def __init__(self) -> None:
        self._blocks: set[bytes] = set()
        self._lock = threading.Lock()

    def cached_tokens(self, ids: Sequence[int]) -> int:
        """The longest block-aligned prefix of ``ids`` that is in the cache."""
        hits = 0
        with self._lock:
            for key in _block_keys(ids):
                if key not in self._blocks:
                    break
                hits += 1
        return hits * BLOCK_SIZE

    def insert(self, ids: Sequence[int]) -> None:
        """Remember every full block of ``ids`` (a served prompt, or prompt + completion)."""
        keys = _block_keys(ids)
        with self._lock:
            self._blocks.update(keys)

    def clear(self) -> None:
        with self._lock:
            self._blocks.clear()

    def __len__(self) -> int:
        """Number of cached blocks."""
        with self._lock:
            return len(self._blocks)
