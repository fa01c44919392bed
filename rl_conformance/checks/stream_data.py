"""Stream-level data rules: what a stream says beside its tokens agrees with its tokens, and with
the unary answer to the same request.

- `stream_usage_counts`: the usage chunk `stream_options.include_usage` asks for counts the ids
  the stream carried, and the prompt the unary answer counted (real Dynamo 1.6.1 with vLLM
  counts exactly the streamed ids, an aborted stream's included:
  `vllm-cpu/completions_stream_rl_fields.json`, `vllm-cpu/stream_during_pause_abort.json`).
- `stream_choices_match`: with `n > 1` under a fixed seed, each streamed index carries the
  unary answer's choice of that index (real vLLM: `vllm-cpu/completions_stream_n2_sampled.json`
  and `vllm-cpu/completions_n2_sampled.json`, seed 7). Text, not ids: Dynamo refuses
  `completion_token_ids` with more than one choice (`vllm-cpu/
  completions_n2_sampled_completion_token_ids.json`).
- `stop_string_sequence`: a stop-string finish returns the greedy sequence up to and including
  the token that completed the match, with the text cut before the matched string. vLLM matches
  stop strings on the detokenized text, keeps the completing token in the output ids and
  truncates only the text (`include_stop_str_in_output` off); real Dynamo 1.6.1 returns stop
  `jopen`, the second greedy token's text, as text `" kozit "` with both ids
  (`vllm-cpu/completions_stop_string.json`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .base import MISSING, Findings, Violation, check, describe, get_path, is_int, is_int_list
from .tokens import usage_disagreements

RETURNS = "Know What Returns to the Trainer"


def _usage_chunk(payloads: Sequence[Any]) -> tuple[int, Any]:
    """The last event carrying a `usage` object, and that object; (-1, MISSING) without one."""
    for event in range(len(payloads) - 1, -1, -1):
        usage = get_path(payloads[event], "usage")
        if isinstance(usage, dict):
            return event, usage
    return -1, MISSING


def streamed_id_count(payloads: Sequence[Any]) -> int:
    return sum(
        len(ids)
        for payload in payloads
        if is_int_list(ids := get_path(payload, "nvext", "completion_token_ids"))
    )


@check(
    "tokens.stream_usage_counts",
    title="a stream's usage chunk counts the ids it streamed and the prompt the unary answer "
    "counted",
    spec="The engine token sequence used for training is authoritative.",
    section="Preserve Token Authority",
)
def stream_usage_counts(payloads: Sequence[Any], unary: Any) -> Findings:
    """`payloads`: a one-choice stream asked with `stream_options.include_usage` and the
    `completion_token_ids` selector; `unary`: the same request's unary body, whose prompt count
    the stream's must repeat (a chat prompt counts its template, which only the deployment
    knows). A unary body without usage leaves the prompt count unjudged here; that body is
    `tokens.usage_consistent`'s."""
    event, usage = _usage_chunk(payloads)
    if usage is MISSING:
        yield Violation(
            "no usage chunk, though stream_options.include_usage asked for one",
            "events[*].usage",
            "an object with prompt_tokens, completion_tokens, total_tokens",
            "(absent)",
        )
        return
    completion = streamed_id_count(payloads)
    prompt = get_path(unary, "usage", "prompt_tokens")
    expected: dict[str, int] = {"completion_tokens": completion}
    if is_int(prompt):
        expected["prompt_tokens"] = prompt
        expected["total_tokens"] = prompt + completion
    elif is_int(usage.get("prompt_tokens")):
        expected["total_tokens"] = usage["prompt_tokens"] + completion
    said = {
        "completion_tokens": f"the {completion} ids the stream carried",
        "prompt_tokens": "the unary answer's usage.prompt_tokens",
        "total_tokens": "prompt_tokens + the streamed ids",
    }
    yield from usage_disagreements(usage, expected, f"events[{event}].usage", said)


def choice_texts(body: Any) -> dict[str, Any]:
    """Each choice's text by its index: completions `text`, chat `message.content`."""
    texts: dict[str, Any] = {}
    choices = get_path(body, "choices")
    for position, choice in enumerate(choices if isinstance(choices, list) else []):
        index = get_path(choice, "index")
        text = get_path(choice, "text")
        if text is MISSING:
            text = get_path(choice, "message", "content")
        texts[str(position if index is MISSING else index)] = text
    return texts


@check(
    "tokens.stream_choices_match",
    title="with n > 1 under a fixed seed, each streamed choice is the unary answer's choice of its "
    "index",
    spec="Use the engine-returned sequence; exact placement depends on the selected interface.",
    section=RETURNS,
)
def stream_choices_match(streamed: Any, unary: Any) -> Findings:
    """`streamed`: a stream merged by `aggregate_stream`; `unary`: the same request (same seed)
    answered unary, by a deployment whose unary answers under that seed were seen to repeat.
    A choice's index is how a trainer pairs it with its sample: content under another index is
    a sample credited to the wrong rollout."""
    wanted, found = choice_texts(unary), choice_texts(streamed)
    for index, text in wanted.items():
        observed = found.get(index, MISSING)
        if observed == text:
            continue
        others = [other for other, value in wanted.items() if value == observed and other != index]
        moved = f": the unary answer's choice {others[0]}" if others else ""
        yield Violation(
            f"streamed choice {index} is not the unary answer's choice {index} under the same "
            f"seed{moved}",
            f"choices[{index}]",
            text,
            describe(observed),
        )


@dataclass(frozen=True)
class StopStringRun:
    """A greedy request that ended on a stop string, beside the same request without `stop`."""

    stops: tuple[str, ...]
    ids: Sequence[int] | None
    """The stopped request's `completion_token_ids`."""
    text: Any
    """The stopped request's text."""
    stop_reason: Any
    """Its `nvext.stop_reason` (MISSING when not returned)."""
    reference_ids: Sequence[int]
    """The ids of the request without `stop`, asked for as many tokens as `ids` holds."""
    reference_text: str
    """That request's text: the deployment's own text of those ids."""
    unstopped_text: str
    """The text of the request without `stop` at the stopped request's `max_tokens`: the stop
    string it reaches follows the stopped text there."""


def matched_stop(run: StopStringRun) -> str | None:
    """The stop string the finish matched: the one `nvext.stop_reason` names, else the one the
    unstopped text continues with after the stopped text (or that ends the stopped text)."""
    if run.stop_reason in run.stops:
        return str(run.stop_reason)
    text = run.text if isinstance(run.text, str) else ""
    after = run.unstopped_text[len(text) :] if run.unstopped_text.startswith(text) else None
    for stop in run.stops:
        if (after is not None and after.startswith(stop)) or (stop and text.endswith(stop)):
            return stop
    return None


@check(
    "stream.stop_string_sequence",
    title="a stop-string finish returns the greedy ids through the token that completed the "
    "match, its text cut at the match",
    spec="Token IDs, log probabilities, masks, and terminal states match the framework contract.",
    section="Integration Checklist",
)
def stop_string_sequence(run: StopStringRun) -> Findings:
    """The stopped ids are the first ids of the same greedy request without `stop`, and the
    deployment's own text of those ids reaches through the matched string: the text returned,
    then the match (vLLM, Dynamo: cut before it), or the text returned ending with it
    (`include_stop_str_in_output`). Held to the text of the ids, not to "ends with the match":
    the completing token may carry characters past the match (`toy-worker/
    completions_stop_string.json`: stop `the`, last token `lothetre`). A sequence that lost the
    completing token (its id and its logprob, while ids, logprobs and usage keep agreeing) has
    a text that stops short of the match, which only this rule sees."""
    if run.ids is None or isinstance(run.stop_reason, int):
        return  # absent ids are tokens.completion_ids'; a stop on an id is the id rule's
    ids, reference = list(run.ids), list(run.reference_ids)
    if ids != reference:
        yield Violation(
            f"the {len(ids)} ids of a stop-string finish are not the first ids of the same greedy "
            "request without stop",
            "nvext.completion_token_ids",
            reference,
            ids,
        )
        return
    text = run.text if isinstance(run.text, str) else ""
    matched = matched_stop(run)
    if matched is None:
        yield Violation(
            f"a stop finish whose text {text!r} neither ends with nor is followed by a requested "
            "stop string in the same request without stop",
            "choices[0].text",
            list(run.stops),
            text,
        )
        return
    through = text if text.endswith(matched) else text + matched
    if not run.reference_text.startswith(through):
        yield Violation(
            f"the stop string {matched!r} is not in the text of the {len(ids)} ids returned "
            f"({run.reference_text!r}): the token that completed it is missing from the "
            "sequence the trainer receives",
            "nvext.completion_token_ids",
            f"ids whose text reaches {through!r}",
            ids,
        )
