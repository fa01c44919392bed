"""A multi-request failure's excerpt keeps the last request and the control calls it follows
from, saying how many requests each gap hides."""

from __future__ import annotations

from rl_conformance.reports import EXCERPT_CHARS, sequence_excerpt


def step(url: str, status: int = 200) -> dict[str, object]:
    return {"request": {"method": "POST", "url": url}, "status": status}


def test_control_calls_and_the_last_request_are_kept() -> None:
    base = "http://127.0.0.1:9/"
    sequence = [step(f"{base}v1/completions") for _ in range(20)]
    sequence += [step(f"{base}engine/pause_generation"), step(f"{base}engine/update_weights")]
    sequence += [step(f"{base}v1/chat/completions") for _ in range(30)]
    sequence.append(step(f"{base}v1/completions", 200))
    text = sequence_excerpt({"sequence": sequence, "requests": len(sequence)})
    lines = text.splitlines()
    assert lines[0] == f"{len(sequence)} request(s) of the test, in order"
    assert lines[1] == "... 20 earlier"
    assert lines[2].endswith("/engine/pause_generation -> HTTP 200")
    assert lines[3].endswith("/engine/update_weights -> HTTP 200")
    assert lines[4].startswith("... ") and lines[4].endswith(" more")
    assert lines[-1].endswith("/v1/completions -> HTTP 200")
    assert len(text) <= EXCERPT_CHARS + 80


def test_a_short_sequence_is_shown_whole() -> None:
    sequence = [step("http://h/v1/completions"), step("http://h/engine/x", 500)]
    text = sequence_excerpt({"sequence": sequence, "requests": 2})
    assert text.splitlines()[1:] == [
        "POST http://h/v1/completions -> HTTP 200",
        "POST http://h/engine/x -> HTTP 500",
    ]
