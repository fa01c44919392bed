"""The toy model: a real, deterministic distribution and an engine built on it."""

from __future__ import annotations

import itertools
import math

import pytest

from fake_backends.model.decoding import SamplingParams, generate_choice, score_prompt
from fake_backends.model.tokenizer import EOS_ID, VOCAB_SIZE, decode, encode
from fake_backends.model.toy_model import ToyModel

PROMPT = [300, 4000, 12345]


def _dist(model: ToyModel, ids: list[int], generated: int = 0, include_eos: bool = True):  # type: ignore[no-untyped-def]
    return model.distribution(model.context(ids), generated, include_eos=include_eos)


def test_distribution_sums_to_one_and_is_finite() -> None:
    dist = _dist(ToyModel(), PROMPT)
    candidates = dist.candidates
    assert len(candidates) == 9  # 8 + EOS
    total = sum(p for _, p in candidates) + dist.tail_prob * (VOCAB_SIZE - len(candidates))
    assert total == pytest.approx(1.0, abs=1e-12)
    for token in (0, 1, 2, 7, 262, 263, 5000, VOCAB_SIZE - 1):
        assert math.isfinite(dist.logprob(token)) and dist.logprob(token) <= 0
    assert all(263 <= t < VOCAB_SIZE for t, _ in candidates if t != EOS_ID)


def test_distribution_is_deterministic_and_depends_on_weights_and_context() -> None:
    a, b = _dist(ToyModel(), PROMPT), _dist(ToyModel(), PROMPT)
    assert a.candidates == b.candidates
    assert _dist(ToyModel("step-1"), PROMPT).candidates != a.candidates
    assert _dist(ToyModel(), [*PROMPT, 5]).candidates != a.candidates


def test_eos_rises_with_generated_tokens_and_ignore_eos_removes_it() -> None:
    model = ToyModel()
    early, late = _dist(model, PROMPT, 0), _dist(model, PROMPT, 20)
    assert late.prob(EOS_ID) > early.prob(EOS_ID)
    assert late.candidates[0][0] == EOS_ID
    assert EOS_ID not in dict(_dist(model, PROMPT, 20, include_eos=False).candidates)


def test_top_is_sorted_and_ranked() -> None:
    dist = _dist(ToyModel(), PROMPT)
    top = dist.top(12)
    assert [a.rank for a in top] == list(range(1, 13))
    assert all(x.logprob >= y.logprob for x, y in itertools.pairwise(top))
    assert dist.rank(top[0].token_id) == 1
    assert dist.rank(top[-1].token_id) == 10  # tail ids all tie behind the 9 candidates


def test_greedy_generation_is_deterministic_and_ends_by_itself() -> None:
    model = ToyModel()
    params = SamplingParams(max_tokens=64)
    one, two = generate_choice(model, PROMPT, params, 0), generate_choice(model, PROMPT, params, 0)
    assert one == two
    assert one.finish == "eos" and one.token_ids[-1] == EOS_ID and one.stop_reason == EOS_ID
    assert len(one.steps) >= 8
    assert one.text == decode(one.token_ids)


def test_seeded_sampling_is_reproducible_per_choice() -> None:
    model = ToyModel()
    params = SamplingParams(max_tokens=12, temperature=1.0, seed=7, ignore_eos=True)
    first = generate_choice(model, PROMPT, params, 0)
    assert generate_choice(model, PROMPT, params, 0) == first
    assert generate_choice(model, PROMPT, params, 1).token_ids != first.token_ids
    other_seed = SamplingParams(max_tokens=12, temperature=1.0, seed=8, ignore_eos=True)
    assert generate_choice(model, PROMPT, other_seed, 0).token_ids != first.token_ids


def test_length_min_tokens_and_stop_token_ids() -> None:
    model = ToyModel()
    result = generate_choice(model, PROMPT, SamplingParams(max_tokens=40, ignore_eos=True), 0)
    assert result.finish == "length" and len(result.steps) == 40 and result.stop_reason is None
    long = generate_choice(model, PROMPT, SamplingParams(max_tokens=40, min_tokens=30), 0)
    assert len(long.steps) >= 30 and EOS_ID not in long.token_ids[:29]
    target = result.token_ids[3]
    stopped = generate_choice(
        model, PROMPT, SamplingParams(max_tokens=40, ignore_eos=True, stop_token_ids=(target,)), 0
    )
    assert (
        stopped.finish == "stop"
        and stopped.token_ids[-1] == target
        and stopped.stop_reason == target
    )
    assert stopped.text == decode(stopped.token_ids[:-1])  # the stop token adds no text


def test_stop_string_cuts_text_but_keeps_the_token() -> None:
    model = ToyModel()
    base = generate_choice(model, PROMPT, SamplingParams(max_tokens=12, ignore_eos=True), 0)
    stop = base.text[len(decode(base.token_ids[:4])) :][1:4]  # straddles a token boundary maybe
    result = generate_choice(
        model, PROMPT, SamplingParams(max_tokens=12, ignore_eos=True, stop=(stop,)), 0
    )
    assert result.finish == "stop" and result.stop_reason == stop
    assert stop not in result.text
    assert base.text.startswith(result.text + stop)
    assert stop in decode(result.token_ids)  # the completing token stayed
    assert "".join(s.text_delta for s in result.steps) == result.text


def test_prompt_scoring_alignment() -> None:
    model = ToyModel()
    prompt = encode("hello world, how are you")
    scores = score_prompt(model, prompt, 2)
    assert len(scores) == len(prompt) and scores[0] is None
    for j in range(1, len(prompt)):
        position = scores[j]
        assert position is not None and position.token_id == prompt[j]
        assert position.logprob == pytest.approx(_dist(model, prompt[:j]).logprob(prompt[j]))
        assert [a.rank for a in position.top] == [1, 2]
