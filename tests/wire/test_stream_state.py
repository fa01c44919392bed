from __future__ import annotations

from typing import Any

from rl_conformance.wire.stream_state import DONE, StreamMachine, StreamState, sglang_terminals


def chunk(index: int = 0, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": index, "text": "x", "finish_reason": finish}]}


def drive(*payloads: Any, end: bool = True, detector: Any = None) -> StreamMachine:
    machine = StreamMachine() if detector is None else StreamMachine(detector=detector)
    for payload in payloads:
        machine.on_payload(payload)
    if end:
        machine.on_end()
    return machine


def test_well_formed_stream_succeeds() -> None:
    machine = drive(chunk(), chunk(finish="length"), {"choices": [], "usage": {}}, DONE)
    assert machine.state is StreamState.SUCCESS


def test_interleaved_choices_succeed() -> None:
    machine = drive(chunk(0), chunk(1), chunk(1, "stop"), chunk(0, "length"), DONE)
    assert machine.state is StreamState.SUCCESS


def test_missing_done_fails() -> None:
    machine = drive(chunk(), chunk(finish="stop"))
    assert machine.state is StreamState.FAILED
    assert "[DONE]" in machine.reason


def test_choice_without_terminal_fails() -> None:
    machine = drive(chunk(0), chunk(1, "stop"), DONE)
    assert machine.state is StreamState.FAILED
    assert "choice(s) 0" in machine.reason


def test_second_terminal_fails() -> None:
    assert drive(chunk(finish="stop"), chunk(finish="stop"), DONE).state is StreamState.FAILED


def test_content_after_terminal_fails() -> None:
    machine = drive(chunk(finish="stop"), chunk(), DONE)
    assert machine.state is StreamState.FAILED
    assert "content after" in machine.reason


def test_error_frame_fails() -> None:
    error = {"error": {"message": "Internal server error", "code": 500}}
    assert drive(chunk(), error, DONE).state is StreamState.FAILED


def test_data_after_done_fails() -> None:
    assert drive(chunk(finish="stop"), DONE, chunk()).state is StreamState.FAILED


def test_stream_without_choices_fails() -> None:
    assert drive(DONE).state is StreamState.FAILED


def test_cancel_is_final_and_never_success() -> None:
    machine = drive(chunk(), end=False)
    machine.on_cancel()
    machine.on_payload(chunk(finish="stop"))
    machine.on_payload(DONE)
    machine.on_end()
    assert machine.state is StreamState.CANCELED


def test_accepted_then_streaming_transitions_are_recorded() -> None:
    machine = drive(chunk(finish="stop"), DONE)
    assert [state for state, _ in machine.transitions] == [
        StreamState.STREAMING,
        StreamState.SUCCESS,
    ]


def test_sglang_events_terminate_on_finish_reason() -> None:
    events = [
        {"output_ids": [1], "meta_info": {"finish_reason": None}},
        {"output_ids": [1, 2], "meta_info": {"finish_reason": {"type": "length"}}},
        DONE,
    ]
    assert drive(*events, detector=sglang_terminals).state is StreamState.SUCCESS
