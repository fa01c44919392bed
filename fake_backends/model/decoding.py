"""Generation and prompt scoring on top of the toy model.

This is the "engine": it turns a prompt and sampling parameters into the token ids,
their logprobs, ranked alternatives, and the text each step releases.  Everything the
frontend reports is derived from these records, so streaming and non-streaming answers
are views of the same data and cannot drift apart unless a fault says so.

Stop handling follows the real Dynamo frontend (CONTRACT-NOTES §O6.12): a stop string
cuts the text, but the token that completed it stays in the ids, logprobs and counts;
EOS and stop-token ids also stay in the ids but add no text.
"""

from __future__ import annotations

import codecs
import hashlib
import math
import random
import secrets
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from fake_backends.model.tokenizer import EOS_ID, token_bytes
from fake_backends.model.toy_model import Alternative, ToyModel

# "cancelled": ended early by an abort (pause in abort mode, abort_request); the engine
# never produces it itself, the control plane truncates a result with it.
FinishKind = Literal["eos", "stop", "length", "cancelled"]

DEFAULT_MAX_TOKENS = 16
_NOTHING: frozenset[int] = frozenset()


@dataclass(frozen=True)
class SamplingParams:
    """What the engine needs to know about one request (per choice)."""

    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    min_tokens: int = 0
    top_k: int | None = None  # length of ranked alternatives per step; None = not needed

    @property
    def greedy(self) -> bool:
        return self.temperature is None or self.temperature == 0


class Step(NamedTuple):
    """One generated token and what it released (a named tuple: a choice makes one per token)."""

    token_id: int
    logprob: float
    rank: int
    top: tuple[Alternative, ...]
    text_delta: str


@dataclass(frozen=True)
class ChoiceResult:
    """A finished choice: the authoritative ids plus how and why it ended."""

    index: int
    steps: tuple[Step, ...]
    finish: FinishKind
    stop_reason: int | str | None

    @property
    def token_ids(self) -> list[int]:
        return [s.token_id for s in self.steps]

    @property
    def logprobs(self) -> list[float]:
        return [s.logprob for s in self.steps]

    @property
    def text(self) -> str:
        return "".join(s.text_delta for s in self.steps)


@dataclass(frozen=True)
class PromptPosition:
    """Scoring of one prompt token given the tokens before it."""

    token_id: int
    logprob: float
    rank: int
    top: tuple[Alternative, ...]


def choice_seed(seed: int | None, index: int) -> int:
    """Seed of choice ``index``: derived from (request seed, index); random without seed."""
    if seed is None:
        return secrets.randbits(64)
    digest = hashlib.blake2b(f"{seed}/{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _held_suffix(text: str, stops: Sequence[str]) -> int:
    """Length of the longest suffix of ``text`` that could still grow into a stop string."""
    best = 0
    for stop in stops:
        for length in range(min(len(stop) - 1, len(text)), best, -1):
            if text.endswith(stop[:length]):
                best = length
                break
    return best


def _first_stop(text: str, start: int, stops: Sequence[str]) -> tuple[int, str] | None:
    hits = [(pos, stop) for stop in stops if (pos := text.find(stop, start)) >= 0]
    return min(hits) if hits else None


def generate_choice(
    model: ToyModel, prompt_ids: Sequence[int], params: SamplingParams, index: int
) -> ChoiceResult:
    """Run one choice to completion."""
    if params.greedy and params.top_k is None and params.min_tokens <= 0 and not any(params.stop):
        key = (model.weights_key, tuple(prompt_ids), params, index)
        found = _GREEDY_CHOICES.get(key)
        if found is None:
            found = _GREEDY_CHOICES[key] = _greedy_choice(model, prompt_ids, params, index)
            if len(_GREEDY_CHOICES) > GREEDY_CHOICES_KEPT:
                _GREEDY_CHOICES.popitem(last=False)
        else:
            _GREEDY_CHOICES.move_to_end(key)
        return found
    return _any_choice(model, prompt_ids, params, index)


GREEDY_CHOICES_KEPT = 64
"""Greedy choices remembered (a choice is a function of weights, prompt and parameters): the
control-plane tests send one long prompt again and again, and computing its 512 steps costs
more than streaming them."""
_GREEDY_CHOICES: OrderedDict[tuple[bytes, tuple[int, ...], SamplingParams, int], ChoiceResult] = (
    OrderedDict()
)


def _greedy_choice(
    model: ToyModel, prompt_ids: Sequence[int], params: SamplingParams, index: int
) -> ChoiceResult:
    """``_any_choice`` for a greedy choice without stop strings, minimum length or ranked
    alternatives (most requests): the same steps, with less work per token."""
    context = model.context(prompt_ids)
    greedy = model.greedy
    log = math.log
    decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
    include_eos = not params.ignore_eos
    stop_ids = frozenset(params.stop_token_ids)
    last = params.max_tokens - 1
    steps: list[Step] = []
    for generated in range(params.max_tokens):
        token, p = greedy(context, generated, include_eos=include_eos)
        context.append(token)
        if token == EOS_ID and include_eos:
            steps.append(Step(token, log(p), 1, (), decode(b"", final=True)))
            return ChoiceResult(index, tuple(steps), "eos", EOS_ID)
        if token in stop_ids:
            steps.append(Step(token, log(p), 1, (), decode(b"", final=True)))
            return ChoiceResult(index, tuple(steps), "stop", token)
        text = decode(token_bytes(token), final=generated == last)
        steps.append(Step(token, log(p), 1, (), text))
    return ChoiceResult(index, tuple(steps), "length", None)


def _any_choice(
    model: ToyModel, prompt_ids: Sequence[int], params: SamplingParams, index: int
) -> ChoiceResult:
    """Run one choice to completion, whatever its parameters."""
    context = model.context(prompt_ids)
    greedy = params.greedy
    temperature = params.temperature
    # A greedy choice draws nothing: no generator (nor system randomness) for it.
    rng = None if greedy else random.Random(choice_seed(params.seed, index))
    decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
    stops = tuple(s for s in params.stop if s)
    longest_stop = max((len(s) for s in stops), default=0)
    stop_ids = frozenset(params.stop_token_ids)
    include_eos = not params.ignore_eos
    end_ids = stop_ids | {EOS_ID} if include_eos else stop_ids
    min_tokens = params.min_tokens
    max_tokens = params.max_tokens
    top_k = params.top_k
    visible = ""
    emitted = 0
    steps: list[Step] = []
    top: tuple[Alternative, ...]
    finish: FinishKind | None = None
    stop_reason: int | str | None = None
    for generated in range(max_tokens):
        excluded = end_ids if generated < min_tokens else _NOTHING
        if rng is None and top_k is None and not excluded:
            token, p = model.greedy(context, generated, include_eos=include_eos)
            logprob, rank, top = math.log(p), 1, ()
        else:
            dist = model.distribution(context, generated, include_eos=include_eos)
            if rng is None:
                token = dist.argmax(excluded)
            else:
                assert temperature is not None
                token = dist.sample(rng, temperature, excluded)
            logprob = dist.logprob(token)
            if top_k is None:
                top, rank = (), dist.rank(token)
            else:
                top = dist.top(top_k)
                rank = _rank_in(top, token, dist.rank(token))
        context.append(token)
        count = generated + 1
        cut_by_stop_string = False
        if token == EOS_ID and include_eos:
            finish, stop_reason = "eos", EOS_ID
        elif token in stop_ids:
            finish, stop_reason = "stop", token
        else:
            before = len(visible)
            visible += decode(token_bytes(token))
            if stops and count >= min_tokens:
                hit = _first_stop(visible, max(emitted, before - longest_stop + 1), stops)
                if hit is not None:
                    visible = visible[: hit[0]]
                    finish, stop_reason = "stop", hit[1]
                    cut_by_stop_string = True
        if finish is None and count >= max_tokens:
            finish = "length"
        if finish is not None:
            if not cut_by_stop_string:
                visible += decode(b"", final=True)
            release = len(visible)
        elif stops:
            release = len(visible) - _held_suffix(visible, stops)
        else:
            release = len(visible)
        release = max(release, emitted)
        delta = visible[emitted:release]
        emitted = release
        steps.append(Step(token, logprob, rank, top, delta))
        if finish is not None:
            break
    if finish is None:  # max_tokens < 1 never reaches here after validation
        finish = "length"
    return ChoiceResult(index, tuple(steps), finish, stop_reason)


def _rank_in(top: Sequence[Alternative], token: int, fallback: int) -> int:
    for alt in top:
        if alt.token_id == token:
            return alt.rank
    return fallback


def score_prompt(
    model: ToyModel, prompt_ids: Sequence[int], k: int, *, include_eos: bool = True
) -> list[PromptPosition | None]:
    """Logprob of each prompt token given its predecessors; position 0 is undefined."""
    out: list[PromptPosition | None] = []
    context = model.context()
    for position, token in enumerate(prompt_ids):
        if position == 0:
            out.append(None)
        else:
            dist = model.distribution(context, 0, include_eos=include_eos)
            top = dist.top(k)
            out.append(
                PromptPosition(
                    token, dist.logprob(token), _rank_in(top, token, dist.rank(token)), top
                )
            )
        context.append(token)
    return out
