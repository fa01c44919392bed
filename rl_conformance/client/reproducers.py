"""Proving a failure's reproducer: run its `curl` command as a user would (no shell; the command
is split as the shell would split it) while the deployment is still up, and compare what comes
back with the wire log the check judged. Same status and the same body or events, once the
fields that differ on every request (ids, timestamps) are set aside, means the same violation.

Only read-only requests are replayed: a reproducer aimed at a worker's `/engine/*` route is
never re-sent by the harness (`not replayed`). A reproducer names credentials by reference
(`$DYNAMO_TOKEN`); replayed, each argument holding one goes to curl in a config read from its
standard input (`-K -`), so no secret is ever on a command line."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..redaction import REDACTOR
from ..wire.exchange import without_keys
from ..wire.sse import SSEParser

VOLATILE_KEYS = frozenset(
    {
        "id",
        "created",
        "system_fingerprint",
        "request_id",
        "worker_id",
        "timestamp",
        "uptime",
        "cached_tokens",  # prefix-cache state changes with every request
        "reused_tokens",  # the same state, as engine_data.kv_cache_hit names it
    }
)
CURL_TIMEOUT_S = 30.0
MOMENT_BOUND = {
    "refresh.inflight_terminal": "the stream crossed a policy refresh",
    "refresh.straddle_reported": "the stream crossed a pause and a weight update",
    "refresh.pause_mode_effect": "the stream crossed a pause",
    "cancel.propagation": "the client left the stream mid-way",
    "retry.attempt_identity": "the attempt was abandoned at its deadline",
    "namespace.scope": "the RL listener ran under a test environment",
    "discovery.identity_not_position": "it compares discovery reads over time",
    "discovery.probe_replies_validated": "a worker answered its route probe with a chosen reply",
    "discovery.probe_deadline": "a worker left its route probe unanswered",
    "refresh.recovered_worker": "the stream crossed its engine's death",
}
"""Capabilities whose failing exchange depends on a moment of the test, which a standalone
request cannot recreate: their reproducers are shown, not replayed."""
_VOLATILE_TEXT = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\"created\":\s*\d+"
)
STATUS_MARK = "\n__rl_conformance_status__:"
CONFIG_NAMES = {"-H": "header", "--data-raw": "data-raw", "--proxy": "proxy"}
"""The curl options a reproducer gives, by their names in a curl config."""


@dataclass(frozen=True)
class Reproduction:
    reproduced: bool | None
    """None: not replayed (the reason says why)."""
    detail: str


def _parse(text: str) -> Any:
    try:
        return without_keys(json.loads(text), VOLATILE_KEYS)
    except ValueError:
        return _VOLATILE_TEXT.sub("<volatile>", text)


def _events(text: str) -> list[Any]:
    parser = SSEParser()
    events = parser.feed(text.encode()) + parser.close()
    return [_parse(event.data) for event in events]


def replayable(wire: dict[str, Any], capabilities: tuple[str, ...] = ()) -> str | None:
    """Why this exchange must not be re-sent, or None."""
    if "sequence" in wire:
        return (
            f"not replayed: a sequence of {wire.get('requests')} requests (run the script "
            "yourself: its administration calls mutate the deployment)"
        )
    for capability in capabilities:
        if capability in MOMENT_BOUND:
            return f"not replayed: {MOMENT_BOUND[capability]}"
    path = urlsplit(str(wire.get("request", {}).get("url", ""))).path
    if path.startswith("/engine/"):
        return "not replayed: an administration call (it may mutate the worker)"
    if wire.get("status") is None:
        return "not replayed: the original request got no response"
    body = str(wire.get("body") or "")
    if body.endswith(" more bytes]") or body.endswith("[cut by the client]"):
        return "not replayed: the recorded body was cut"
    if wire.get("state") == "canceled":
        return "not replayed: the client closed the stream early on purpose (a replay reads it all)"
    if wire.get("events_elided"):
        return f"not replayed: the recorded stream was cut ({wire['events_elided']} events elided)"
    return None


def reproduce(
    reproducer: str,
    wire: dict[str, Any],
    capabilities: tuple[str, ...] = (),
    timeout_s: float = CURL_TIMEOUT_S,
) -> Reproduction:
    why_not = replayable(wire, capabilities)
    if why_not is not None:
        return Reproduction(None, why_not)
    command = shlex.split(reproducer)
    if not command or command[0] != "curl":
        return Reproduction(None, "not replayed: not a curl command")
    command, secrets = secrets_off_the_command_line(command)
    command += ["--max-time", str(int(timeout_s)), "-w", STATUS_MARK + "%{http_code}"]
    try:
        done = subprocess.run(
            command,
            input=secrets,
            capture_output=True,
            text=True,
            timeout=timeout_s + 5,
            check=False,
        )
    except FileNotFoundError:
        return Reproduction(None, "not replayed: curl is not installed")
    except subprocess.TimeoutExpired:
        return Reproduction(False, f"curl did not finish within {timeout_s:.0f} s")
    body, _, status = done.stdout.rpartition(STATUS_MARK)
    if not status.strip().isdigit() or int(status) == 0:
        return Reproduction(
            False, f"curl got no response (exit {done.returncode}): {done.stderr[-300:]}"
        )
    if int(status) != wire.get("status"):
        return Reproduction(False, f"HTTP {status}, the failure had HTTP {wire.get('status')}")
    if "events" in wire:
        recorded = [_parse(str(event.get("data", ""))) for event in wire["events"]]
        if _events(body) != recorded:
            return Reproduction(False, "the events differ from the recorded ones")
    elif _parse(body) != _parse(str(wire.get("body") or "")):
        return Reproduction(False, "the body differs from the recorded one")
    return Reproduction(True, f"same HTTP {status} and the same response")


def secrets_off_the_command_line(command: list[str]) -> tuple[list[str], str]:
    """curl's arguments without those that name a credential, and a curl config holding them
    resolved (read with `-K -` from standard input; "" when there is none)."""
    kept: list[str] = []
    lines: list[str] = []
    arguments = iter(command)
    for argument in arguments:
        name = CONFIG_NAMES.get(argument)
        if name is not None:
            value = next(arguments, "")
            if REDACTOR.holds_reference(value):
                lines.append(f"{name} = {_config_string(REDACTOR.resolve(value))}")
            else:
                kept += [argument, value]
        elif not argument.startswith("-") and REDACTOR.holds_reference(argument):
            lines.append(f"url = {_config_string(REDACTOR.resolve(argument))}")
        else:
            kept.append(argument)
    if lines:
        kept += ["-K", "-"]
    return kept, "".join(line + "\n" for line in lines)


def _config_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + '"'
