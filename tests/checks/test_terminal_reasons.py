"""Terminal reasons held to the sequence they end, rule by rule."""

from __future__ import annotations

from rl_conformance.checks import terminal
from rl_conformance.checks.base import MISSING


def violations(asked: terminal.Asked, ending: terminal.Ending) -> list[str]:
    return [v.field for v in terminal.terminal_reason_true(asked, ending).violations]


def test_a_length_finish_holds_max_tokens_ids() -> None:
    asked = terminal.Asked(4, ignore_eos=True)
    assert violations(asked, terminal.Ending("length", [1, 2, 3, 4], None, "length")) == []
    assert violations(asked, terminal.Ending("length", [1, 2, 3], None, "length")) == [
        "choices[0].completion_token_ids"
    ]


def test_a_stop_id_ends_the_sequence_and_is_the_one_named() -> None:
    asked = terminal.Asked(6, stop_token_ids=(9,))
    assert violations(asked, terminal.Ending("stop", [5, 9], 9, "stop")) == []
    assert violations(asked, terminal.Ending("stop", [5, 9, 7], 9, "stop")) == [
        "choices[0].completion_token_ids"
    ]
    assert violations(asked, terminal.Ending("stop", [5], 9, "stop")) == [
        "choices[0].completion_token_ids[-1]"
    ]
    # an EOS stop names no id: nothing to hold the sequence to
    assert violations(asked, terminal.Ending("stop", [5, 2], None, "stop")) == []


def test_ignore_eos_clears_every_stop_in_dynamo() -> None:
    asked = terminal.Asked(6, stop_token_ids=(9,), ignore_eos=True)
    assert violations(asked, terminal.Ending("length", [5, 9, 1, 1, 1, 1], None, "length")) == []
    assert violations(asked, terminal.Ending("stop", [5, 9], 9, "stop")) == [
        "choices[0].finish_reason"
    ]


def test_an_abort_cut_short_says_cancelled_and_a_natural_finish_never_does() -> None:
    cut = [5, 7]

    def reported(ending: terminal.Ending) -> list[str]:
        return [v.field for v in terminal.abort_reported(6, ending).violations]

    assert reported(terminal.Ending("stop", cut, None, "cancelled")) == []
    assert reported(terminal.Ending("stop", cut, None, "stop")) == [
        "choices[0].nvext.detailed_finish_reason"
    ]
    assert reported(terminal.Ending("stop", cut, None, MISSING)) == []
    assert reported(terminal.Ending("length", [1] * 6, None, "length")) == []
    natural = terminal.Asked(6, ignore_eos=True)
    assert violations(natural, terminal.Ending("length", [1] * 6, None, "cancelled")) == [
        "choices[0].nvext.detailed_finish_reason"
    ]


def test_a_stop_no_requested_condition_explains_ends_on_an_eos_id() -> None:
    eos = terminal.Asked(48, eos_token_ids=(2, 0))
    assert terminal.terminal_reason_true(eos, terminal.Ending("stop", [5, 7, 2])).passed
    dropped = terminal.terminal_reason_true(eos, terminal.Ending("stop", [5, 7]))
    assert "neither a requested stop id nor one of the model's EOS ids [0, 2]" in dropped.explain()
    # a requested stop id explains the stop as well; unknown EOS ids judge nothing
    stop_id = terminal.Asked(48, stop_token_ids=(7,), eos_token_ids=(2,))
    assert terminal.terminal_reason_true(stop_id, terminal.Ending("stop", [5, 7])).passed
    assert terminal.terminal_reason_true(terminal.Asked(48), terminal.Ending("stop", [5])).passed
    assert terminal.terminal_reason_true(eos, terminal.Ending("stop", None)).passed  # no ids
    # a stop string may end anywhere
    text = terminal.Asked(48, stop_strings=("ab",), eos_token_ids=(2,))
    assert terminal.terminal_reason_true(text, terminal.Ending("stop", [5], "ab")).passed
