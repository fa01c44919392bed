"""Which Dynamo release has which RL surface, with the evidence for each.

The spec tracks Dynamo main; users run released wheels. A capability is judged against what the
deployment's release has: a surface its release lacks makes the capability `unsupported` on that
deployment (with the release named), not `fail`. The release of a target is observed (the
frontend's `GET /openapi.json` `info.version`, `plan.record_versions`), given by the launcher
(the installed `ai-dynamo` version) or declared with `--dynamo-release`, and `matrix.json` says
which (`dynamo_release_source`); when none of them tells, the release is unknown and the
capabilities are judged against `main`, the release the spec documents (said as such, never
claimed as the deployment's).

Evidence, per surface and release (details in `fixtures/DYNAMO_RELEASES.md`): for 1.6.1, our
recordings of the real wheels (`fixtures/dynamo-1.6.1/`) or strings of its `_core.abi3.so`; for
main, the upstream source file. Measured so far, 1.6.1 has every surface the capabilities test
(its wheel was built after the main sources we read), so both releases are judged alike; a
release missing from a surface's `present` map lacks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

MAIN = "main"
RELEASES: tuple[str, ...] = ("1.6.1", MAIN)
OBSERVED_SOURCE = "observed"
LAUNCHER_SOURCE = "launcher"
FLAG_SOURCE = "--dynamo-release"
UNKNOWN_SOURCE = "unknown"
RELEASE_SOURCES: Mapping[str, str] = MappingProxyType(
    {
        OBSERVED_SOURCE: "observed: the deployment published it",
        LAUNCHER_SOURCE: "the launcher's installed ai-dynamo",
        FLAG_SOURCE: "declared with --dynamo-release, not observed",
        UNKNOWN_SOURCE: "not observed",
    }
)
"""How a target's Dynamo release is known (`dynamo_release_source` in `matrix.json`)."""


def judged_as(release: str) -> str:
    """The release whose surfaces a capability is judged against: a release with surfaces here
    (`RELEASES`), else main (what the spec documents)."""
    return release if release in RELEASES else MAIN


def release_text(release: str, source: str, where: str | None = None) -> str:
    """How a report states a target's release: `Dynamo 1.6.1 (observed: ...)`, and for an
    unknown release only what it was judged against."""
    if source == UNKNOWN_SOURCE:
        return f"Dynamo release not observed (judged as {judged_as(release)}, the default basis)"
    how = RELEASE_SOURCES.get(source, source)
    if source == OBSERVED_SOURCE and where:
        how = f"observed: {where}"
    basis = judged_as(release)
    judged = "" if basis == release else f"; judged as {basis}"
    return f"Dynamo {release} ({how}{judged})"


@dataclass(frozen=True)
class Surface:
    id: str
    title: str
    capabilities: tuple[str, ...]
    present: Mapping[str, str]
    """Release -> the evidence that it has the surface."""


def _surface(
    id: str, title: str, capabilities: tuple[str, ...], present: dict[str, str]
) -> Surface:
    assert set(present) <= set(RELEASES), present
    return Surface(id, title, capabilities, MappingProxyType(present))


SURFACES: tuple[Surface, ...] = (
    _surface(
        "rl.workers_v1",
        "GET /v1/rl/workers, protocol version 1, on the RL listener",
        (
            "discovery.protocol_version",
            "discovery.schema",
            "discovery.listener_isolation",
            "discovery.worker_registration",
            "discovery.routes",
            "discovery.endpoint_identity",
            "discovery.identity_not_position",
            "discovery.error_fails_closed",
        ),
        {
            "1.6.1": "recorded: fixtures/dynamo-1.6.1/toy-worker/rl_workers_get.json",
            "main": "lib/rl/src/lib.rs (RL_WORKERS_PROTOCOL_VERSION = 1)",
        },
    ),
    _surface(
        "rl.namespace_scope",
        "the RL listener's namespace scope from its DYN_NAMESPACE* environment",
        ("namespace.scope",),
        {
            "1.6.1": "measured: tests/dynamo/test_namespace_differential.py (100/100 agreement)",
            "main": "lib/rl/src/lib.rs resolve_namespace_filter",
        },
    ),
    # The administration families gate no capability by release: advertised routes decide a
    # worker's family at run time, so a release without one simply has no workers speaking it.
    _surface(
        "admin.python_worker",
        "the vLLM Python worker's RL routes (pause_generation ... at /engine/<name>)",
        (),
        {
            "1.6.1": "recorded: fixtures/dynamo-1.6.1/toy-worker/flow_*.json (dynamo.common.rl)",
            "main": "components/src/dynamo/vllm/handlers.py",
        },
    ),
    _surface(
        "admin.native_sidecar",
        "the native vLLM sidecar's control/* and update/* routes",
        (),
        {
            "1.6.1": "wheel: dynamo/vllm/sidecar.py; _core.abi3.so strings 'Weight transfer "
            "initialized', 'unsupported engine control'",
            "main": "lib/sidecar/vllm/src/engine.rs, lib/backend-common/src/worker.rs",
        },
    ),
    _surface(
        "nvext.token_fields",
        "nvext.extra_fields completion_token_ids, prompt_token_ids, engine_data, "
        "detailed_finish_reason, stop_reason",
        (
            "tokens.prompt_ids_echo",
            "tokens.completion_ids",
            "tokens.stream_concat",
            "stream.finish_reason",
        ),
        {
            "1.6.1": "recorded: fixtures/dynamo-1.6.1/toy-worker/completions_extra_fields_all.json",
            "main": "docs: NVIDIA Request Extensions (nvext)",
        },
    ),
    _surface(
        "frontend.input_tokens",
        "POST /v1/responses/input_tokens",
        ("tokens.input_tokens_estimate",),
        {
            "1.6.1": "recorded: fixtures/dynamo-1.6.1/toy-worker/responses_input_tokens.json",
            "main": "rl-integration-reference: Choose a Request Interface",
        },
    ),
)


def missing_in(
    release: str, capability_id: str, surfaces: tuple[Surface, ...] = SURFACES
) -> list[Surface]:
    """The surfaces `capability_id` needs that `release` lacks; a release without surfaces here
    is judged as main, by the spec (`judged_as`)."""
    release = judged_as(release)
    return [
        surface
        for surface in surfaces
        if capability_id in surface.capabilities and release not in surface.present
    ]
