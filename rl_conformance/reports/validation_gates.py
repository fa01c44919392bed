"""Which verdicts fill which field of Dynamo's run record (`dynamo.rl.validation.v1`).

A gate's yes/no field is true only when every input behind it passed; a gate is `passed` when
all its inputs passed, `failed` when any failed, and `not_run` otherwise (an input skipped, in
error, unsupported or not run at all), so a record never claims more than the run observed. An input
marked `optional` may be unsupported or not advertised without holding the gate back: that field
then reads `not_applicable`. Counts (the update's target version and workers, a trace join's
attempts and terminals) come from what the tests measured (`TestRecord.measured`).

A deployment run judges the deployment's share of each gate: what the serving side must do for a
framework to meet it (a deployment does not train, so `training_iteration` is never run there).
An adapter certification judges the adapter's share, scenario by scenario. `docs/EVIDENCE.md`
renders this table.
"""

from __future__ import annotations

from dataclasses import dataclass

GATE_NAMES = (
    "generation_smoke",
    "token_logprob",
    "training_iteration",
    "policy_update",
    "retry_and_cancellation",
    "failure_recovery",
    "trace_correlation",
)


@dataclass(frozen=True)
class Input:
    capability: str
    scenarios: tuple[str, ...] = ()
    """Adapter certification only: the scenarios whose verdicts count (none: every scenario)."""
    optional: bool = False


@dataclass(frozen=True)
class Field:
    name: str
    inputs: tuple[Input, ...]


@dataclass(frozen=True)
class Gate:
    name: str
    fields: tuple[Field, ...] = ()
    also: tuple[Input, ...] = ()
    """Inputs the gate's status rests on beyond those of its fields."""
    not_run_because: str = ""
    """Why this kind of run never judges the gate."""

    @property
    def inputs(self) -> tuple[Input, ...]:
        seen: dict[tuple[str, tuple[str, ...]], Input] = {}
        for item in (*(i for f in self.fields for i in f.inputs), *self.also):
            seen.setdefault((item.capability, item.scenarios), item)
        return tuple(seen.values())


def _all(*capabilities: str) -> tuple[Input, ...]:
    return tuple(Input(capability) for capability in capabilities)


DEPLOYMENT_GATES: tuple[Gate, ...] = (
    Gate(
        "generation_smoke",
        also=_all(
            "tokens.token_input",
            "tokens.completion_ids",
            "tokens.model_identity",
            "stream.terminal_success",
        ),
    ),
    Gate(
        "token_logprob",
        (
            Field(
                "exact_completion_token_ids",
                _all(
                    "tokens.completion_ids",
                    "tokens.prompt_ids_echo",
                    "tokens.stream_concat",
                    "tokens.usage_consistent",
                    "tokens.choice_count",
                ),
            ),
            Field(
                "completion_logprobs_aligned",
                _all(
                    "logprobs.selected_alignment",
                    "logprobs.finite_nonpositive",
                    "logprobs.topk_consistent",
                ),
            ),
            Field("prompt_logprobs", (Input("logprobs.prompt_alignment", optional=True),)),
            Field(
                "terminal_reasons_verified",
                _all(
                    "stream.terminal_reason_verified",
                    "stream.single_terminal",
                    "stream.nothing_after_terminal",
                    "stream.done_last",
                    "stream.finish_reason",
                    "stream.terminal_success",
                ),
            ),
        ),
    ),
    Gate(
        "training_iteration",
        not_run_because="a deployment run sends no optimizer step: the framework's run judges it",
    ),
    Gate(
        "policy_update",
        (
            Field("cache_handling", (Input("refresh.kv_invalidation", optional=True),)),
            Field(
                "post_update_generation",
                _all("refresh.post_update_generation", "refresh.served_policy_verified"),
            ),
        ),
        also=_all(
            "refresh.version_verified",
            "admin.route_negotiation",
            "admin.success_semantics",
            "refresh.pause_gates",
            "refresh.inflight_terminal",
            "refresh.lifecycle",
        ),
    ),
    Gate(
        "retry_and_cancellation",
        (
            Field("duplicate_suppression_verified", _all("retry.attempt_identity")),
            Field("canceled_incomplete_sample_verified", _all("cancel.propagation")),
        ),
    ),
    Gate(
        "failure_recovery",
        (
            Field("request_failure_recovered", _all("errors.validation")),
            Field("worker_failure_recovered", _all("discovery.error_fails_closed")),
            Field("weight_update_failure_recovered", _all("refresh.lifecycle")),
        ),
    ),
    Gate("trace_correlation", also=_all("telemetry.trace_correlation", "telemetry.bounded_labels")),
)

_REQUEST_FAILURES = ("stream_cut", "unavailable_while_paused", "bad_gateway", "late_completion")
_WORKER_FAILURES = (
    "worker_joins",
    "worker_leaves",
    "discovery_entry_error",
    "discovery_protocol_v2",
    "route_missing_on_one_worker",
)
_UPDATE_FAILURES = (
    "update_fails_on_one_worker",
    "refresh_retried",
    "flush_fails",
    "post_update_generation_fails",
)

ADAPTER_GATES: tuple[Gate, ...] = (
    Gate(
        "generation_smoke",
        also=(
            Input("adapter.generation_reaches_backend", ("iteration",)),
            Input("adapter.verified_terminal_only", ("iteration",)),
            Input("adapter.engine_token_ids", ("iteration",)),
        ),
    ),
    Gate(
        "token_logprob",
        (
            Field("exact_completion_token_ids", (Input("adapter.engine_token_ids"),)),
            Field("completion_logprobs_aligned", (Input("adapter.logprob_alignment"),)),
            Field("terminal_reasons_verified", (Input("adapter.verified_terminal_only"),)),
        ),
    ),
    Gate(
        "training_iteration",
        not_run_because="the certification kit drives rollouts and refreshes, never an optimizer "
        "step: the framework's own run judges it",
    ),
    Gate(
        "policy_update",
        (
            Field(
                "cache_handling",
                (Input("adapter.complete_iteration", ("iteration", "two_iterations")),),
            ),
            Field(
                "post_update_generation",
                (Input("adapter.complete_iteration", ("iteration", "two_iterations")),),
            ),
        ),
        also=(
            Input("adapter.discovery_before_control", ("iteration", "two_iterations")),
            Input("adapter.mutations_to_advertised", ("iteration", "two_iterations")),
        ),
    ),
    Gate(
        "retry_and_cancellation",
        (
            Field(
                "duplicate_suppression_verified",
                (
                    Input("adapter.single_admission", ("late_completion",)),
                    Input("adapter.attempt_identity", ("late_completion",)),
                ),
            ),
            Field(
                "canceled_incomplete_sample_verified",
                (
                    Input("adapter.verified_terminal_only", ("cancellation",)),
                    Input("adapter.single_admission", ("cancellation",)),
                ),
            ),
        ),
    ),
    Gate(
        "failure_recovery",
        (
            Field(
                "request_failure_recovered",
                (
                    Input("adapter.verified_terminal_only", _REQUEST_FAILURES),
                    Input("adapter.single_admission", _REQUEST_FAILURES),
                ),
            ),
            Field(
                "worker_failure_recovered",
                (Input("adapter.gated_after_failure", _WORKER_FAILURES),),
            ),
            Field(
                "weight_update_failure_recovered",
                (
                    Input("adapter.gated_after_failure", _UPDATE_FAILURES),
                    Input("adapter.complete_iteration", ("refresh_retried",)),
                ),
            ),
        ),
    ),
    Gate(
        "trace_correlation",
        not_run_because="the certification kit's fleet keeps no Dynamo request trace: run the "
        "suite on the deployment (telemetry.trace_correlation)",
    ),
)


def render_markdown() -> str:
    """The table, as `docs/EVIDENCE.md` shows it (a test holds the two together)."""
    lines = []
    for title, gates in (
        ("Deployment run", DEPLOYMENT_GATES),
        ("Adapter certification", ADAPTER_GATES),
    ):
        lines += [f"### {title}", "", "| gate | field | from |", "|---|---|---|"]
        for gate in gates:
            if gate.not_run_because:
                lines.append(f"| `{gate.name}` | (all) | never run: {gate.not_run_because} |")
                continue
            rows = [(field.name, field.inputs) for field in gate.fields]
            if gate.also:
                rows.append(("status, also", gate.also))
            for name, inputs in rows:
                lines.append(f"| `{gate.name}` | `{name}` | {_inputs(inputs)} |")
        lines.append("")
    return "\n".join(lines)


def _inputs(inputs: tuple[Input, ...]) -> str:
    parts = []
    for item in inputs:
        text = f"`{item.capability}`"
        if item.scenarios:
            text += " in " + ", ".join(item.scenarios)
        if item.optional:
            text += " (optional)"
        parts.append(text)
    return "; ".join(parts)
