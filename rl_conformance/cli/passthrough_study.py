"""The pass-through report: for each engine-level fault, what the real Dynamo frontend did with
it (rejected it, repaired it, or passed it through to the client) and whether the suite caught it
at the response level. A fault the frontend passes through and the suite does not catch is a hole
in the suite: the report marks it and the command exits non-zero.

Measured, not read from the catalogue: a fixed set of probe requests is sent to a real frontend
with a clean engine and with the faulty engine; a probe that errors is `rejected`, a response that
differs from the clean one (ids, timestamps and timings aside) is `passed through`, an identical
one is `repaired`. Admin-only faults never reach the frontend (`not visible to the frontend`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..client.http import Client
from ..launchers.dynamo import DynamoLauncher
from ..launchers.run_plan import plan_run
from ..model.capabilities import CAPABILITIES
from ..model.config import RunConfig
from ..model.target import Target
from ..plugin.runner import run
from ..redaction import write_text
from ..wire.exchange import Exchange, without_keys
from ..wire.stream_state import sglang_terminals

ENGINE_INDEPENDENT = frozenset({"namespace.scope"})
PROMPT = [640, 1024, 777, 1800, 512, 333, 901, 445]
VOLATILE = {
    "id",
    "created",
    "timing",
    "request_received_ms",
    "ttft_ms",
    "total_time_ms",
    "prefill_wait_time_ms",
    "prefill_time_ms",
    "worker_id",
    "e2e_latency",
    "response_sent_to_client_ts",
    "rid",
}


@dataclass(frozen=True)
class Probe:
    name: str
    send: Callable[[Client, Target], Exchange]


def _completion(client: Client, target: Target, *, stream: bool) -> Exchange:
    body = {
        "model": target.model,
        "prompt": PROMPT,
        "max_tokens": 6,
        "temperature": 0,
        "logprobs": 2,
        "prompt_logprobs": 1,
        "ignore_eos": True,
        "nvext": {
            "extra_fields": [
                "completion_token_ids",
                "prompt_token_ids",
                "prompt_logprobs",
                "engine_data",
            ]
        },
    }
    if stream:
        return client.stream(
            "POST", target.url("/v1/completions"), json_body={**body, "stream": True}
        )
    return client.post(target.url("/v1/completions"), body)


def _chat(client: Client, target: Target) -> Exchange:
    body = {
        "model": target.model,
        "messages": [{"role": "user", "content": "probe"}],
        "max_tokens": 6,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 2,
        "prompt_logprobs": 1,
        "nvext": {"token_data": PROMPT},
    }
    return client.post(target.url("/v1/chat/completions"), body)


def _generate(client: Client, target: Target) -> Exchange:
    body = {
        "input_ids": PROMPT,
        "stream": True,
        "return_logprob": True,
        "logprob_start_len": 0,
        "sampling_params": {"max_new_tokens": 6, "temperature": 0},
    }
    return client.stream("POST", target.url("/generate"), json_body=body, detector=sglang_terminals)


PROBES = (
    Probe("completions", lambda client, target: _completion(client, target, stream=False)),
    Probe("completions-stream", lambda client, target: _completion(client, target, stream=True)),
    Probe("chat", _chat),
    Probe("sglang-generate", _generate),
)


def _normalise(value: Any) -> Any:
    return without_keys(value, VOLATILE)


def observe(exchange: Exchange) -> tuple[str, Any]:
    """('rejected', detail) or ('delivered', normalised payload)."""
    if exchange.status != 200:
        return "rejected", f"HTTP {exchange.status or exchange.error}"
    if exchange.state is not None and exchange.state.value != "success":
        return "rejected", f"stream {exchange.state.value}: {exchange.state_reason}"
    try:
        payload = exchange.payloads() if exchange.streamed else exchange.json()
    except ValueError as exc:
        return "rejected", str(exc)
    return "delivered", _normalise(payload)


def probe_all(target: Target) -> dict[str, tuple[str, Any]]:
    with Client(deadline_s=20) as client:
        return {probe.name: observe(probe.send(client, target)) for probe in PROBES}


def classify(
    clean: dict[str, tuple[str, Any]], faulty: dict[str, tuple[str, Any]]
) -> dict[str, str]:
    verdicts = {}
    for name, (kind, payload) in faulty.items():
        if kind == "rejected" and clean[name][0] != "rejected":
            verdicts[name] = f"rejected ({payload})"
        elif kind == clean[name][0] and payload == clean[name][1]:
            verdicts[name] = "repaired or not visible"
        else:
            verdicts[name] = "passed through"
    return verdicts


def run_suite(fault: str, report_dir: Path, python: Path | None) -> dict[str, Any] | None:
    """The whole suite against the real frontend with this engine fault; None if no matrix.

    The listener's namespace scope does not depend on the engine; re-scoping restarts the
    frontend about ten times, which would dominate every fault's run."""
    from fake_backends.faults.engine import toy_engine_for

    config = RunConfig(
        launch=f"dynamo-{toy_engine_for(fault)}",
        engine_fault=(fault,),
        dynamo_python=(str(python),) if python is not None else (),
        allow_mutations=True,
        all_workers=True,
        examples=3,
        report_dir=str(report_dir),
        capability=tuple(c.id for c in CAPABILITIES if c.id not in ENGINE_INDEPENDENT),
    )
    matrix = run(plan_run(config), verbosity="quiet").matrix
    return matrix.to_json() if matrix is not None else None


def caught_by(matrix: dict[str, Any]) -> list[str]:
    return sorted(
        row["id"]
        for row in matrix["capabilities"]
        for cell in row["cells"].values()
        if cell["outcome"] in ("fail", "error")
    )


def build_report(report_dir: Path, python: Path | None, faults: list[str]) -> dict[str, Any]:
    from fake_backends.faults.engine import ENGINE_FAULTS, toy_engine_for

    started = time.monotonic()
    report_dir.mkdir(parents=True, exist_ok=True)
    clean_launcher = DynamoLauncher(engine="fake-vllm", python=python)
    target = clean_launcher.start()
    try:
        clean = probe_all(target)
        version = target.versions.get("ai-dynamo", "?")
    finally:
        clean_launcher.stop()
    rows = []
    for fault in faults:
        launcher = DynamoLauncher(
            engine=toy_engine_for(fault), python=python, engine_faults=(fault,)
        )
        faulty_target = launcher.start()
        try:
            frontend = classify(clean, probe_all(faulty_target))
        finally:
            launcher.stop()
        admin_only = ENGINE_FAULTS[fault].applies_to == frozenset({"admin"})
        passed_through = any(v == "passed through" for v in frontend.values())
        matrix = run_suite(fault, report_dir / "runs" / fault, python)
        caught = caught_by(matrix) if matrix is not None else []
        if matrix is None:
            frontend = {"suite": "error: the suite run wrote no matrix"}
        rows.append(
            {
                "fault": fault,
                "description": ENGINE_FAULTS[fault].description,
                "frontend": "not visible to the frontend (admin route)" if admin_only else frontend,
                "passed_through": passed_through,
                "caught_by": caught,
                "hole": matrix is None or ((passed_through or admin_only) and not caught),
            }
        )
    return {
        "dynamo_version": version,
        "engine": "fake_backends toy engine",
        "duration_s": round(time.monotonic() - started, 1),
        "faults": rows,
        "holes": [row["fault"] for row in rows if row["hole"]],
    }


def render(report: dict[str, Any]) -> str:
    lines = [
        f"# Engine faults through the real Dynamo {report['dynamo_version']} frontend",
        "",
        f"{len(report['faults'])} engine faults; holes (passed through, not caught): "
        f"{', '.join(report['holes']) or 'none'}. Measured in {report['duration_s']} s.",
        "",
        "| fault | what the frontend did (per probe) | caught by the suite |",
        "|---|---|---|",
    ]
    for row in report["faults"]:
        frontend = (
            row["frontend"]
            if isinstance(row["frontend"], str)
            else "<br>".join(f"{probe}: {verdict}" for probe, verdict in row["frontend"].items())
        )
        caught = ", ".join(f"`{c}`" for c in row["caught_by"]) or "**NOT CAUGHT**"
        lines.append(f"| `{row['fault']}` | {frontend} | {caught} |")
    return "\n".join(lines) + "\n"


def write(report: dict[str, Any], report_dir: Path) -> None:
    write_text(report_dir / "passthrough.json", json.dumps(report, indent=2) + "\n")
    write_text(report_dir / "passthrough.md", render(report))
