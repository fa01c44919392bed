"""Every check passes on a faithful observation and fails on one that breaks exactly its rule.

A rule check with no case here is a row's own check whose row names the faults made to break it
(`flipped_by`): the kill matrix is its demonstration, the fault failing that very check and the
clean fakes passing it (`tests/e2e/test_kill_matrix.py`). A case here is welcome for any check (a
fast one); a finer check, which no row's faults name, must have one."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from rl_conformance.checks import (
    REGISTRY,
    CheckResult,
    discovery,
    errors,
    http,
    logprobs,
    pause_modes,
    schema_check,
    streaming,
    terminal,
    tokens,
)
from rl_conformance.checks.aggregate import aggregate_stream
from rl_conformance.checks.base import rule_ids
from rl_conformance.checks.schema_registry import schema_names
from rl_conformance.contract import BY_ID as ROWS

from . import (
    bodies,
    control_cases,
    gauge_cases,
    held_cases,
    migration_cases,
    probe_cases,
    recorded,
    release_cases,
)

Case = tuple[Callable[[], CheckResult], Callable[[], CheckResult]]


def mutated(factory: Callable[[], Any], change: Callable[[Any], None]) -> Any:
    value = factory()
    change(value)
    return value


def setitem(path: list[Any], value: Any) -> Callable[[Any], None]:
    def apply(document: Any) -> None:
        target = document
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return apply


def delitem(path: list[Any]) -> Callable[[Any], None]:
    def apply(document: Any) -> None:
        target = document
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return apply


W0 = ["workers", 0]
LP = ["choices", 0, "logprobs"]
CASES: dict[str, Case] = {
    "discovery.protocol_version": (
        lambda: discovery.protocol_version(bodies.discovery()),
        lambda: discovery.protocol_version(
            mutated(bodies.discovery, setitem(["protocol_version"], 2))
        ),
    ),
    "discovery.routes_well_formed": (
        lambda: discovery.routes_well_formed(bodies.discovery()),
        lambda: discovery.routes_well_formed(
            mutated(bodies.discovery, setitem([*W0, "routes"], ["liveness_probe", "flush_cache"]))
        ),
    ),
    "discovery.request_plane_url": (
        lambda: discovery.request_plane_url(bodies.discovery()),
        lambda: discovery.request_plane_url(
            mutated(
                bodies.discovery,
                setitem([*W0, "request_plane_url"], "dyn://dynamo.backend.generate"),
            )
        ),
    ),
    "discovery.instance_ids": (
        lambda: discovery.instance_ids(bodies.discovery()),
        lambda: discovery.instance_ids(
            mutated(bodies.discovery, setitem([*W0, "instance_id"], 7.587886443219045e18))
        ),
    ),
    "discovery.optional_fields": (
        lambda: discovery.optional_fields(bodies.discovery()),
        lambda: discovery.optional_fields(
            mutated(bodies.discovery, setitem([*W0, "system_url"], None))
        ),
    ),
    "discovery.error_fails_closed": (
        lambda: discovery.error_fails_closed(
            mutated(
                bodies.discovery,
                lambda d: (
                    d["workers"][0].update(routes=[], error="probe timed out")
                    or (d["workers"][0].pop("system_url") and d["workers"][0].pop("world_size"))
                ),
            )
        ),
        lambda: discovery.error_fails_closed(
            mutated(bodies.discovery, setitem([*W0, "error"], "probe timed out"))
        ),
    ),
    "discovery.identity_stable": (
        lambda: discovery.identity_stable(bodies.discovery(), bodies.discovery()),
        lambda: discovery.identity_stable(
            bodies.discovery(),
            mutated(
                bodies.discovery,
                lambda d: [w.update(instance_id=w["instance_id"] + 1) for w in d["workers"]],
            ),
        ),
    ),
    "tokens.prompt_ids_echo": (
        lambda: tokens.prompt_ids_echo(bodies.completion(), bodies.PROMPT),
        lambda: tokens.prompt_ids_echo(
            mutated(bodies.completion, setitem(["nvext", "prompt_token_ids"], [1, *bodies.PROMPT])),
            bodies.PROMPT,
        ),
    ),
    "tokens.prompt_ids_present": (
        lambda: tokens.prompt_ids_present(bodies.completion()),
        lambda: tokens.prompt_ids_present(
            mutated(bodies.completion, delitem(["nvext", "prompt_token_ids"]))
        ),
    ),
    "tokens.completion_ids_present": (
        lambda: tokens.completion_ids_present(bodies.completion()),
        lambda: tokens.completion_ids_present(
            mutated(bodies.completion, delitem(["nvext", "completion_token_ids"]))
        ),
    ),
    "tokens.choice_count": (
        lambda: tokens.choice_count(bodies.completion(), 1),
        lambda: tokens.choice_count(
            mutated(
                bodies.completion, lambda d: d["choices"].append(dict(d["choices"][0], index=1))
            ),
            1,
        ),
    ),
    "tokens.usage_consistent": (
        lambda: tokens.usage_consistent(bodies.completion(), bodies.PROMPT, bodies.IDS),
        lambda: tokens.usage_consistent(
            mutated(bodies.completion, setitem(["usage", "completion_tokens"], 4)),
            bodies.PROMPT,
            bodies.IDS,
        ),
    ),
    "tokens.stream_concat": (
        lambda: tokens.stream_concat(bodies.stream(), bodies.IDS),
        lambda: tokens.stream_concat(bodies.stream()[:2] + bodies.stream()[3:], bodies.IDS),
    ),
    "tokens.engine_data_agreement": (
        lambda: tokens.engine_data_agreement(
            mutated(
                bodies.completion,
                setitem(["nvext", "engine_data", "completion_token_ids"], bodies.IDS),
            )
        ),
        lambda: tokens.engine_data_agreement(
            mutated(
                bodies.completion,
                setitem(["nvext", "engine_data", "completion_token_ids"], [7, 8, 9]),
            )
        ),
    ),
    "stream.no_silent_cancellation": (
        lambda: streaming.no_silent_cancellation(
            mutated(bodies.completion, setitem(["nvext", "detailed_finish_reason"], "length"))
        ),
        lambda: streaming.no_silent_cancellation(
            mutated(bodies.completion, setitem(["nvext", "detailed_finish_reason"], "cancelled"))
        ),
    ),
    "tokens.text_token_equivalence": (
        lambda: tokens.text_token_equivalence([1, 2], [1, 2]),
        lambda: tokens.text_token_equivalence([1, 2], [1, 3]),
    ),
    "tokens.model_identity": (
        lambda: tokens.model_identity("toy", "toy", ["toy"]),
        lambda: tokens.model_identity("other-model", "toy", ["toy"]),
    ),
    "tokens.input_tokens_estimate": (
        lambda: tokens.input_tokens_estimate(
            {"object": "response.input_tokens", "input_tokens": 3}
        ),
        lambda: tokens.input_tokens_estimate(
            {"object": "response.input_tokens", "input_tokens": -1}
        ),
    ),
    "logprobs.selected_alignment": (
        lambda: logprobs.selected_alignment(bodies.completion(), bodies.IDS),
        lambda: logprobs.selected_alignment(
            mutated(
                bodies.completion, lambda d: d["choices"][0]["logprobs"]["token_logprobs"].pop()
            ),
            bodies.IDS,
        ),
    ),
    "logprobs.present": (
        lambda: logprobs.present(bodies.completion()),
        lambda: logprobs.present(mutated(bodies.completion, setitem([*LP[:2], "logprobs"], None))),
    ),
    "logprobs.finite_nonpositive": (
        lambda: logprobs.finite_nonpositive(bodies.completion()),
        lambda: logprobs.finite_nonpositive(
            mutated(bodies.completion, setitem([*LP, "token_logprobs", 0], math.nan))
        ),
    ),
    "logprobs.topk_consistent": (
        lambda: logprobs.topk_consistent(bodies.completion(), 1, greedy=True),
        lambda: logprobs.topk_consistent(
            mutated(bodies.completion, delitem([*LP, "top_logprobs", 1, " ba"])), 1, greedy=True
        ),
    ),
    "logprobs.prompt_alignment": (
        lambda: logprobs.prompt_alignment(bodies.prompt_logprobs(), bodies.PROMPT),
        lambda: logprobs.prompt_alignment([None, None, bodies.prompt_logprobs()[1]], bodies.PROMPT),
    ),
    "logprobs.sglang_alignment": (
        lambda: logprobs.sglang_alignment(bodies.sglang_final(), bodies.PROMPT),
        lambda: logprobs.sglang_alignment(
            mutated(
                bodies.sglang_final, setitem(["meta_info", "input_token_logprobs", 0, 0], -0.1)
            ),
            bodies.PROMPT,
        ),
    ),
    "stream.single_terminal": (
        lambda: streaming.single_terminal(bodies.stream()),
        lambda: streaming.single_terminal(bodies.stream()[:3] + bodies.stream()[2:]),
    ),
    "stream.nothing_after_terminal": (
        lambda: streaming.nothing_after_terminal(bodies.stream()),
        lambda: streaming.nothing_after_terminal(
            bodies.stream()[:3] + bodies.stream()[:1] + bodies.stream()[3:]
        ),
    ),
    "stream.done_last": (
        lambda: streaming.done_last(bodies.stream()),
        lambda: streaming.done_last(bodies.stream()[:-1]),
    ),
    "stream.finish_reason_recognised": (
        lambda: streaming.finish_reason_recognised(bodies.stream()),
        lambda: streaming.finish_reason_recognised(
            mutated(bodies.stream, setitem([2, "choices", 0, "finish_reason"], "weird_reason"))
        ),
    ),
    "stream.unary_finish_reason": (
        lambda: streaming.unary_finish_reason(bodies.completion()),
        lambda: streaming.unary_finish_reason(
            mutated(bodies.completion, setitem(["choices", 0, "finish_reason"], None))
        ),
    ),
    "stream.stop_reason_placement": (
        lambda: streaming.stop_reason_placement(
            {"choices": [{"finish_reason": "stop"}], "nvext": {"stop_reason": "the"}}, ["the"], True
        ),
        lambda: streaming.stop_reason_placement(
            {"choices": [{"finish_reason": "stop", "stop_reason": "the"}]}, ["the"], False
        ),
    ),
    "stream.terminal_success": (
        lambda: streaming.terminal_success("success", "ok"),
        lambda: streaming.terminal_success("failed", "stream ended without data: [DONE]"),
    ),
    "errors.status_and_body": (
        lambda: errors.status_and_body(
            400, {"message": "Validation: bad", "type": "Bad Request", "code": 400}, 400
        ),
        lambda: errors.status_and_body(200, {"choices": []}, 400),
    ),
    "errors.context_window_refused": (
        lambda: errors.context_window_refused(400),
        lambda: errors.context_window_refused(200),
    ),
    "discovery.dynamo_listener": (
        lambda: discovery.dynamo_listener(bodies.discovery()),
        lambda: discovery.dynamo_listener(
            {
                "protocol_version": 1,
                "workers": [{"id": "a1", "url": "http://w:30000", "engine": "sglang"}],
                "total": 1,
            }
        ),
    ),
    "stream.terminal_reason_verified": (
        lambda: terminal.terminal_reason_true(
            terminal.Asked(4, stop_token_ids=(9,)),
            terminal.Ending("stop", [5, 9], 9, "stop"),
        ),
        lambda: terminal.terminal_reason_true(
            terminal.Asked(4, stop_token_ids=(9,)),
            terminal.Ending("stop", [5], 9, "stop"),
        ),
    ),
    "generate.native_ids_agree": (
        lambda: tokens.native_ids_agree("output_ids", [5, 7], [5, 7]),
        lambda: tokens.native_ids_agree("output_ids", [5], [5, 7]),
    ),
    "http.status": (lambda: http.status(200, 200), lambda: http.status(None, 200, "reset")),
    "http.status_in": (lambda: http.status_in(405, {405}), lambda: http.status_in(200, {404, 405})),
    "http.event_stream": (
        lambda: http.event_stream("text/event-stream; charset=utf-8", 3),
        lambda: http.event_stream("application/json", 0, '{"choices": []}'),
    ),
    "http.json_body": (
        lambda: http.json_body(None, "{}"),
        lambda: http.json_body("Expecting value", "<html>"),
    ),
    **recorded.CASES,
    "refresh.pause_mode_effect": (
        lambda: pause_modes.pause_mode_effect(bodies.held_crossing(0)),
        lambda: pause_modes.pause_mode_effect(bodies.held_crossing(60)),
    ),
    "admin.resume_serves_promptly": (
        lambda: pause_modes.resume_serves_promptly([pause_modes.AfterResume("a", 0.1, 2)], 0.1, 1),
        lambda: pause_modes.resume_serves_promptly([pause_modes.AfterResume("a", 3, 5)], 0.1, 1),
    ),
}
CASES.update(probe_cases.CASES)
CASES.update(release_cases.CASES)
CASES.update(control_cases.CASES)
CASES.update(migration_cases.CASES)
CASES.update(gauge_cases.CASES)
CASES.update(held_cases.CASES)


def shown_by_the_kill_matrix(check_id: str) -> bool:
    """A row's own check whose row names the faults made to break it."""
    return check_id in ROWS and bool(ROWS[check_id].flipped_by)


def test_every_registered_rule_has_a_case() -> None:
    assert set(CASES) <= set(rule_ids()), "a case for a check that is not registered"
    owed = {check_id for check_id in rule_ids() if not shown_by_the_kill_matrix(check_id)}
    missing = sorted(owed - set(CASES))
    assert not missing, f"no faithful and violating case for: {', '.join(missing)}"


def test_every_schema_is_a_registered_check_that_can_fail() -> None:
    """Schema checks are proven by their schemas' invalid examples
    (tests/test_schema_invalid_cases.py); here: each schema is a registered check, called through
    the registry."""
    schemas = {check_id for check_id, found in REGISTRY.items() if found.family == "schema"}
    assert schemas == {f"schema.{name.replace('-', '_')}" for name in schema_names()}
    assert not schema_check("completion", "not a completion").passed


@pytest.mark.parametrize("check_id", sorted(CASES))
def test_check_passes_on_faithful_and_fails_on_violating_observation(check_id: str) -> None:
    faithful, violating = CASES[check_id]
    good = faithful()
    assert good.check_id == check_id
    assert good.passed, good.explain()
    bad = violating()
    assert bad.check_id == check_id
    assert not bad.passed
    for violation in bad.violations:
        assert violation.message
    assert check_id in bad.explain()


def test_chat_alignment_detects_a_reordered_token() -> None:
    body = bodies.chat()
    assert logprobs.selected_alignment(body, bodies.IDS).passed
    content = body["choices"][0]["logprobs"]["content"]
    content[0], content[1] = content[1], content[0]
    result = logprobs.selected_alignment(body, bodies.IDS)
    assert not result.passed
    assert result.violations[0].expected == 3067


def test_reversed_completion_logprobs_are_caught_by_the_top_entry() -> None:
    body = bodies.completion()
    body["choices"][0]["logprobs"]["token_logprobs"].reverse()
    assert not logprobs.selected_alignment(body, bodies.IDS).passed


def test_stream_aggregation_concatenates_like_dynamo() -> None:
    merged = aggregate_stream(bodies.stream())
    assert merged["nvext"]["completion_token_ids"] == bodies.IDS
    assert merged["choices"][0]["text"] == "gezi ba"
    assert merged["choices"][0]["finish_reason"] == "stop"
    assert merged["usage"]["completion_tokens"] == 3


def test_checks_survive_any_shape() -> None:
    for shape in (None, 3, "x", [], {"choices": "no"}, {"workers": [1, None]}):
        discovery.routes_well_formed(shape)
        discovery.instance_ids(shape)
        tokens.completion_ids_present(shape)
        logprobs.finite_nonpositive(shape)
        logprobs.selected_alignment(shape, [1])
        streaming.single_terminal([shape])


def test_absent_nvext_names_the_switch_that_drops_it() -> None:
    result = tokens.completion_ids_present({"choices": [{"text": "x"}]})
    assert "DYN_DISABLE_FRONTEND_NVEXT" in result.violations[0].message
    partial = tokens.completion_ids_present({"choices": [], "nvext": {"timing": {}}})
    assert "DYN_DISABLE_FRONTEND_NVEXT" not in partial.violations[0].message


def test_every_rule_is_registered_by_importing_the_package_alone() -> None:
    """The kill matrix lists the rules a fresh process registers: a check module the package
    does not import would be missing there."""
    import subprocess
    import sys

    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            "from rl_conformance.checks.base import rule_ids; print('\\n'.join(rule_ids()))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert set(listed) == set(rule_ids())
