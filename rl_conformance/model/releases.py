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
1.7.0, its newest wheel the registry serves (1.7.0.dev20261026) run here and read; for main, the
upstream source file. Measured so far, 1.6.1 lacks only the sidecar's engine recovery (and, test
by test, the refusals in `REQUEST_CHECKS`); a release missing from a surface's `present` map
lacks it. A
pre-release or development build (`1.7.0.dev20261026`, `1.7.0-dev20261026`, `1.7.0rc1`) is judged
as the release it leads to, and the report says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

MAIN = "main"
RELEASES: tuple[str, ...] = ("1.6.1", "1.7.0", MAIN)
_BUILD_OF = re.compile(r"^v?(\d+\.\d+\.\d+)(?:[.-]?(?:dev|rc|a|b|post)[.-]?\d*)*$")
"""A release string and the release it is a build of: `1.7.0.dev20261026` (PEP 440, the wheel),
`1.7.0-dev20261026` (the frontend's OpenAPI `info.version`), `1.7.0rc1`."""
OBSERVED_SOURCE = "observed"
LAUNCHER_SOURCE = "launcher"
FLAG_SOURCE = "--dynamo-release"
DOCKER_CONFIG_SOURCE = "docker-config"
UNKNOWN_SOURCE = "unknown"
RELEASE_SOURCES: Mapping[str, str] = MappingProxyType(
    {
        OBSERVED_SOURCE: "observed: the deployment published it",
        LAUNCHER_SOURCE: "the launcher's installed ai-dynamo",
        FLAG_SOURCE: "declared with --dynamo-release, not observed",
        DOCKER_CONFIG_SOURCE: "declared by the docker deployment file, not observed",
        UNKNOWN_SOURCE: "not observed",
    }
)
"""How a target's Dynamo release is known (`dynamo_release_source` in `matrix.json`)."""


def judged_as(release: str) -> str:
    """The release whose surfaces a capability is judged against: a release with surfaces here
    (`RELEASES`), or the one a build of it leads to, else main (what the spec documents)."""
    if release in RELEASES:
        return release
    build = _BUILD_OF.match(release.strip())
    if build and build.group(1) in RELEASES:
        return build.group(1)
    return MAIN


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
            "1.7.0": "measured: the 1.7.0.dev20261026 listener answers protocol_version 1 with "
            "the same worker body (fixtures/DYNAMO_RELEASES.md)",
            "main": "lib/rl/src/lib.rs (RL_WORKERS_PROTOCOL_VERSION = 1)",
        },
    ),
    _surface(
        "rl.probe_validation",
        "the RL listener validates each worker's route-probe reply and bounds the probe by "
        "DYN_RL_REQUEST_TIMEOUT_SECS",
        ("discovery.probe_replies_validated", "discovery.probe_deadline"),
        {
            "1.6.1": "wheel 1.6.1: _core.abi3.so holds the listener's messages ('worker routes "
            "response contains a non-string route entry', '... has 'admin_base_url' without "
            "valid 'world_size'', 'worker discovery timed out after') and "
            "DYN_RL_REQUEST_TIMEOUT_SECS",
            "1.7.0": "wheel 1.7.0.dev20261026: _core.abi3.so holds the same messages",
            "main": "lib/rl/src/lib.rs parse_worker_routes, describe_worker",
        },
    ),
    _surface(
        "rl.namespace_scope",
        "the RL listener's namespace scope from its DYN_NAMESPACE* environment",
        ("namespace.scope",),
        {
            "1.6.1": "measured: tests/dynamo/test_namespace_differential.py (100/100 agreement)",
            "1.7.0": "wheel 1.7.0.dev20261026: dynamo/common/rl/ byte-identical to 1.6.1's",
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
            "1.7.0": "wheel 1.7.0.dev20261026: dynamo/vllm/handlers.py, the same routes",
            "main": "components/src/dynamo/vllm/handlers.py",
        },
    ),
    _surface(
        "admin.native_sidecar",
        "the native vLLM sidecar's control/* and update/* routes",
        (),
        {
            "1.7.0": "wheel 1.7.0.dev20261026: _core.abi3.so keeps the sidecar's strings; the "
            "1.7.0 notes call the sidecar experimental",
            "1.6.1": "wheel: dynamo/vllm/sidecar.py; _core.abi3.so strings 'Weight transfer "
            "initialized', 'unsupported engine control'",
            "main": "lib/sidecar/vllm/src/engine.rs, lib/backend-common/src/worker.rs",
        },
    ),
    _surface(
        "admin.version_declaration",
        "the vLLM Python worker's version_declared in get_weight_version and update replies",
        ("admin.version_declaration",),
        {
            "1.6.1": "recorded: fixtures/dynamo-1.6.1/vllm-cpu/"
            "flow_12_update_back_no_version.json, "
            "flow_13_get_weight_version_after_unversioned_update.json",
            "1.7.0": "wheel 1.7.0.dev20261026: dynamo/vllm/handlers.py get_weight_version, "
            "set_weight_version, update_weights_from_disk",
            "main": "docs: RL Integration Reference, Read and Declare the Weight Version",
        },
    ),
    _surface(
        "sidecar.engine_recovery",
        "the worker restarts a dead engine by itself (the native vLLM sidecar's recovery)",
        ("refresh.recovered_worker",),
        {
            "1.7.0": "the 1.7.0 release notes: the sidecar recovers a dead engine automatically",
            "main": "lib/sidecar/vllm (the native vLLM sidecar)",
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
            "1.7.0": "measured: the 1.7.0.dev20261026 frontend returns the same nvext fields",
            "main": "docs: NVIDIA Request Extensions (nvext)",
        },
    ),
    _surface(
        "frontend.input_tokens",
        "POST /v1/responses/input_tokens",
        ("tokens.input_tokens_estimate",),
        {
            "1.6.1": "recorded: fixtures/dynamo-1.6.1/toy-worker/responses_input_tokens.json",
            "1.7.0": "measured: tokens.input_tokens_estimate passed on the 1.7.0.dev20261026 "
            "frontend",
            "main": "rl-integration-reference: Choose a Request Interface",
        },
    ),
)


REQUEST_CHECKS: tuple[Surface, ...] = (
    _surface(
        "sglang.native_input_ids_validated",
        "the SGLang worker refuses a native /generate input id outside the vocabulary (400 "
        "`Token id N is out of vocabulary at input_ids[i]`)",
        (),
        {
            "1.7.0": "wheel 1.7.0.dev20261026: dynamo/sglang/request_handlers/handler_base.py "
            "_validate_request_token_ids (every token input path)",
            "main": "ai-dynamo/dynamo PR #12916 'validate token IDs on all client-supplied input "
            "paths', as the 1.7.0 wheel ships it",
        },
    ),
    _surface(
        "frontend.metadata_upload_forms",
        "the frontend reads nvext.metadata_upload in two forms, legacy {url, fallback_url} and "
        "generation artifact {kind, contents, mode, destination}, and refuses the rest with "
        "its own reasons",
        (),
        {
            "1.7.0": "recorded: fixtures/dynamo-1.7.0.dev20261026/metadata_upload_shapes.json "
            "(1.6.1 refuses both new forms with serde's unknown field)",
            "main": "as 1.7.0.dev20261026, the newest measured (its _core.abi3.so: "
            "dynamo_llm::protocols::common::metadata_upload); upstream main not read",
        },
    ),
)
"""Refusals a release added that gate one test, not a whole capability: on a release without
one, the test is skipped naming the release (1.6.1's SGLang worker checks `nvext.token_data`
only: `_validate_nvext_token_data`)."""


def has_request_check(release: str, surface_id: str) -> bool:
    surface = next(s for s in REQUEST_CHECKS if s.id == surface_id)
    return judged_as(release) in surface.present


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
