"""The deterministic toy language model: a next-token distribution from a hash.

Why a hash model: the conformance suite needs an engine whose every number can be
recomputed independently (same weights + same context => same distribution), whose
distribution is a real one (every id has a finite logprob <= 0 and the probabilities sum
to one), and whose outputs change when the weights change.  No tensors are needed.

At each step the distribution depends only on the weights tag, the full context ids
(prompt + generated so far) and the number of generated tokens (which drives EOS):

* 8 candidate ids in [263, 32768) and their logits come from ``blake2b(key=weights,
  data=context)``;
* EOS joins the candidates (unless ``ignore_eos``) with a logit that rises with the
  number of generated tokens, so generations end by themselves, but rarely early;
* ``p(candidate) = 0.99 * softmax(logits)``; every other id gets ``0.01 / (V - |cand|)``.
"""

from __future__ import annotations

import hashlib
import math
import operator
import random
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fake_backends.model.tokenizer import EOS_ID, FIRST_PIECE_ID, PIECE_COUNT, VOCAB_SIZE

CANDIDATES = 8
CANDIDATE_MASS = 0.99
MAX_LOGIT = 4.0
EOS_SLOPE = 0.5
EOS_ONSET = 8
# The digest read as the candidates' raw ids (little-endian u32 at bytes 0..31) and their logit
# scales (little-endian u16 at bytes 32..47).
_DIGEST_FIELDS = struct.Struct(f"<{CANDIDATES}I{CANDIDATES}H")
_U32 = struct.Struct("<I")
_PROBABILITY = operator.itemgetter(1)
_exp = math.exp
# A logit scale (u16) as its logit, the same float ``MAX_LOGIT * (scale / 0xFFFF)`` gives.
_LOGIT_OF_SCALE = tuple(MAX_LOGIT * (scale / 0xFFFF) for scale in range(0x10000))
_logit_of = _LOGIT_OF_SCALE.__getitem__


@dataclass(frozen=True)
class Alternative:
    """One entry of a ranked list: a token, its logprob and its 1-based rank."""

    token_id: int
    logprob: float
    rank: int


class Distribution:
    """A full next-token distribution over the vocabulary, stored sparsely."""

    __slots__ = ("_logits", "_prob", "_ranked", "tail_prob")

    def __init__(self, candidates: Sequence[tuple[int, float]]) -> None:
        ids, logits = zip(*candidates, strict=True)
        self._build(ids, logits)

    @classmethod
    def from_logits(cls, ids: Sequence[int], logits: Sequence[float]) -> Distribution:
        """The distribution of these candidate ids with these logits (in the same order)."""
        dist = cls.__new__(cls)
        dist._build(ids, logits)
        return dist

    def _build(self, ids: Sequence[int], logits: Sequence[float]) -> None:
        probs = candidate_probabilities(logits)
        # Most likely first, ties to the lower id: sorted by id, then stably by probability.
        ranked = sorted(zip(ids, probs, strict=True))
        ranked.sort(key=_PROBABILITY, reverse=True)
        self._ranked: tuple[tuple[int, float], ...] = tuple(ranked)
        self._logits = dict(zip(ids, logits, strict=True))
        self._prob = dict(ranked)
        self.tail_prob = (1.0 - CANDIDATE_MASS) / (VOCAB_SIZE - len(ranked))

    @property
    def candidates(self) -> tuple[tuple[int, float], ...]:
        """(id, probability) of the candidates, most likely first (ties: lower id)."""
        return self._ranked

    def prob(self, token_id: int) -> float:
        return self._prob.get(token_id, self.tail_prob)

    def logprob(self, token_id: int) -> float:
        return math.log(self.prob(token_id))

    def rank(self, token_id: int) -> int:
        """vLLM's rank: 1 + the number of ids that are strictly more likely."""
        p = self.prob(token_id)
        higher = 0
        for _, q in self._ranked:  # most likely first
            if q <= p:
                break
            higher += 1
        if token_id not in self._prob and self.tail_prob > p:  # pragma: no cover - impossible
            higher += VOCAB_SIZE - len(self._ranked)
        return higher + 1

    def top(self, k: int) -> tuple[Alternative, ...]:
        """The k most likely ids, most likely first, ranked 1..k.

        Beyond the candidates every id is equally likely; the lowest ids fill the list,
        so the answer is still deterministic.
        """
        out: list[Alternative] = []
        for tid, p in self._ranked[:k]:
            out.append(Alternative(tid, math.log(p), len(out) + 1))
        tail_lp = math.log(self.tail_prob)
        tid = 0
        while len(out) < k and tid < VOCAB_SIZE:
            if tid not in self._prob:
                out.append(Alternative(tid, tail_lp, len(out) + 1))
            tid += 1
        return tuple(out)

    def argmax(self, excluded: frozenset[int] = frozenset()) -> int:
        for tid, _ in self._ranked:
            if tid not in excluded:
                return tid
        return self._first_tail(excluded)

    def sample(
        self, rng: random.Random, temperature: float, excluded: frozenset[int] = frozenset()
    ) -> int:
        """Seeded sampling: a candidate (temperature-scaled) with 0.99, else a tail id."""
        allowed = [(tid, self._logits[tid]) for tid, _ in self._ranked if tid not in excluded]
        if allowed and rng.random() < CANDIDATE_MASS:
            top = max(logit for _, logit in allowed)
            weights = [math.exp((logit - top) / temperature) for _, logit in allowed]
            pick = rng.random() * sum(weights)
            for (tid, _), w in zip(allowed, weights, strict=True):
                pick -= w
                if pick <= 0:
                    return tid
            return allowed[-1][0]
        for _ in range(64):
            tid = rng.randrange(VOCAB_SIZE)
            if tid not in self._prob and tid not in excluded:
                return tid
        return self._first_tail(excluded)

    def _first_tail(self, excluded: frozenset[int]) -> int:
        for tid in range(VOCAB_SIZE):
            if tid not in self._prob and tid not in excluded:
                return tid
        raise ValueError("every token is excluded")  # pragma: no cover


class Context:
    """An incrementally hashed token context (prompt + generated so far)."""

    def __init__(self, key: bytes, ids: Iterable[int] = ()) -> None:
        self._hash = hashlib.blake2b(key=key, digest_size=64)
        self._length = 0
        self.extend(ids)

    def __len__(self) -> int:
        return self._length

    def extend(self, ids: Iterable[int]) -> None:
        chunk = list(ids)
        if chunk:
            self._hash.update(struct.pack(f"<{len(chunk)}I", *chunk))
            self._length += len(chunk)

    def append(self, token_id: int) -> None:
        self._hash.update(_U32.pack(token_id))
        self._length += 1

    def digest(self) -> bytes:
        return self._hash.copy().digest()


class ToyModel:
    """Weights = a tag string; different tags give unrelated distributions."""

    def __init__(self, weights_tag: str = "initial") -> None:
        self.weights_tag = weights_tag
        self._key = hashlib.blake2b(
            f"fake-backends-weights:{weights_tag}".encode(), digest_size=32
        ).digest()

    @property
    def weights_key(self) -> bytes:
        """What sets these weights apart from any other tag's."""
        return self._key

    def context(self, ids: Iterable[int] = ()) -> Context:
        return Context(self._key, ids)

    def distribution(self, context: Context, generated: int, *, include_eos: bool) -> Distribution:
        """The next-token distribution after ``context``, ``generated`` tokens into a reply."""
        ids, logits = self.candidates(context, generated, include_eos=include_eos)
        return Distribution.from_logits(ids, logits)

    def candidates(
        self, context: Context, generated: int, *, include_eos: bool
    ) -> tuple[list[int], list[float]]:
        """The candidate ids of ``distribution`` and their logits, in candidate order."""
        fields = _DIGEST_FIELDS.unpack_from(context.digest())
        ids = [value % PIECE_COUNT + FIRST_PIECE_ID for value in fields[:CANDIDATES]]
        if len(set(ids)) < CANDIDATES:
            ids = [raw + FIRST_PIECE_ID for raw in _distinct([i - FIRST_PIECE_ID for i in ids])]
        logits = list(map(_logit_of, fields[CANDIDATES:]))
        if include_eos:
            ids.append(EOS_ID)
            logits.append(EOS_SLOPE * (generated - EOS_ONSET))
        return ids, logits

    def greedy(self, context: Context, generated: int, *, include_eos: bool) -> tuple[int, float]:
        """``distribution``'s most likely id (ties: the lower id) and its probability, the same
        numbers without the distribution: most generations' every step."""
        fields = _DIGEST_FIELDS.unpack_from(context.digest())
        logits = list(map(_logit_of, fields[CANDIDATES:]))
        if include_eos:
            logits.append(EOS_SLOPE * (generated - EOS_ONSET))
        top = max(logits)
        # The top candidate's weight is exp(0) == 1: its probability is CANDIDATE_MASS / total.
        probability = CANDIDATE_MASS / sum([_exp(logit - top) for logit in logits])
        position = logits.index(top)
        if logits.count(top) == 1:
            if position == CANDIDATES:
                return EOS_ID, probability
            raw = fields[position] % PIECE_COUNT
            # Only an id that an earlier candidate took is moved (see ``_distinct``).
            if raw not in [value % PIECE_COUNT for value in fields[:position]]:
                return raw + FIRST_PIECE_ID, probability
        ids, _ = self.candidates(context, generated, include_eos=include_eos)
        return min(i for i, logit in zip(ids, logits, strict=True) if logit == top), probability


def candidate_probabilities(logits: Sequence[float]) -> list[float]:
    """``CANDIDATE_MASS * softmax(logits)``, in the order of ``logits``."""
    top = max(logits)
    weights = [_exp(logit - top) for logit in logits]
    total = sum(weights)
    return [CANDIDATE_MASS * w / total for w in weights]


def _distinct(raws: list[int]) -> list[int]:
    """Each raw id moved up (cyclically) past the ids taken before it."""
    seen: set[int] = set()
    out: list[int] = []
    for raw in raws:
        while raw in seen:
            raw = (raw + 1) % PIECE_COUNT
        seen.add(raw)
        out.append(raw)
    return out
