"""Worker administration: routes, replies, pauses and updates.

The capability rows of this area, each declared once."""

from __future__ import annotations

from .kinds import (
    ADMIN,
    ADMIN_SECTION,
    DISCOVERY,
    REFRESH,
    RL_WORKERS,
    Backend,
    Level,
    Support,
    row,
)

ROUTE_NEGOTIATION = row(
    "admin.route_negotiation",
    "Administered workers advertise system_url and the update path's routes",
    DISCOVERY,
    "Refresh discovery before each control phase and require the complete capability set for "
    "the selected update path.",
    RL_WORKERS,
    asserts="an administered worker advertises a system_url and every route the update path needs",
    flipped_by=(
        "required_route_missing",
        "routes_renamed",
        "sidecar_partial_transfer_routes",
        "system_url_absent",
        "worker_without_routes",
    ),
)

SUCCESS_SEMANTICS = row(
    "admin.success_semantics",
    "Admin calls report success by HTTP status and body",
    ADMIN_SECTION,
    "Python RL routes commonly return a `status` field; native-sidecar routes follow vLLM's RL "
    "schemas; built-in SGLang update routes commonly return `success` and `message`; check both "
    "HTTP status and body.",
    ADMIN,
    asserts="an administrative call succeeds by HTTP status AND body",
    flipped_by=("admin_http200_failure_body", "sidecar_status_words", "unknown_route_200"),
)

INVALID_PAUSE_MODE = row(
    "admin.invalid_pause_mode",
    "An invalid pause mode is refused naming it, and the worker keeps serving",
    ADMIN_SECTION,
    "Python RL routes commonly return a `status` field; built-in SGLang update routes commonly "
    "return `success` and `message`; check both HTTP status and body. (Upstream: vLLM's RL "
    "tests, tests/entrypoints/rl/state_transitions/, pin an invalid mode refused with the pause "
    "state unchanged.)",
    ADMIN,
    asserts="an invalid pause mode is refused naming it, and the worker keeps serving",
    flipped_by=(
        "invalid_pause_mode_accepted",
        "invalid_pause_mode_pauses",
        "sglang_invalid_pause_mode_crashes",
    ),
)

PAUSE_CYCLES = row(
    "admin.pause_cycles",
    "Repeated and concurrent pauses and resumes are all answered, and the worker serves after",
    REFRESH,
    "Pause or drain workers when the backend requires it. (Upstream: repeated pause/resume "
    "cycles are idempotent, vLLM tests/entrypoints/rl/state_transitions/; a pause that never "
    "returns, FastDeploy #7825.)",
    ADMIN,
    asserts=(
        "repeated and concurrent pauses and resumes are all answered, and the worker serves "
        "after the resume"
    ),
    flipped_by=(
        "pause_counted_past_first_worker",
        "pause_counted_per_caller",
        "second_pause_hangs",
        "sglang_second_pause_fails",
    ),
)

STOPPED_WORKER_UNROUTED = row(
    "admin.stopped_worker_unrouted",
    "A paused or released worker leaves routing, and rejoins when restored",
    ADMIN_SECTION,
    "`release_memory_occupation` unregisters and drains the worker; `resume_memory_occupation` "
    "restores it. (Upstream: Dynamo's SGLang worker follows SGLang's pause state, the native "
    "sidecar's pause and sleep unregister, TensorRT-LLM's memory routes with --load-format gms; "
    "ai-dynamo/dynamo PR #15078, paused workers still routed to.)",
    {
        Backend.VLLM: Support.UNDOCUMENTED,
        Backend.SGLANG: Support.SUPPORTED,
        Backend.TRTLLM: Support.UNDOCUMENTED,
    },
    asserts=(
        "a worker that is paused or releases its memory leaves routing, and rejoins when restored"
    ),
    flipped_by=("stopped_worker_listed",),
)

UNPAUSED_UPDATE_REFUSED = row(
    "admin.unpaused_update_refused",
    "An update sent to a running worker that requires a pause is refused",
    REFRESH,
    "Pause or drain workers when the backend requires it.",
    RL_WORKERS,
    asserts=(
        "a weight update sent to a running worker that requires a pause is refused and leaves "
        "the reported version as it was"
    ),
    flipped_by=("unpaused_update_applied",),
)

VERSION_DECLARATION = row(
    "admin.version_declaration",
    "A worker reports the last weight version declared to it",
    "Read and Declare the Weight Version",
    "Version declarations accept any JSON value, including `null`. An explicit "
    '`{"weight_version": null}` is a declaration: `get_weight_version` then returns `"version": '
    'null` with `"version_declared": true`. If the request omits `weight_version`, the reply '
    'contains `"version": "unknown"` and `"version_declared": false`, and the previous '
    "declaration remains unchanged. (Upstream integration reference, "
    "https://docs.nvidia.com/dynamo/dev/reinforcement-learning/rl-integration-reference)",
    RL_WORKERS,
    asserts=(
        "a worker reports the last version declared to it: null is one, an update without "
        "weight_version is none"
    ),
    flipped_by=("null_version_undeclared", "unversioned_update_declares"),
)

DISTRIBUTED_UPDATE = row(
    "admin.distributed_update",
    "The distributed update and update_weight_version declare their version in order, and fail "
    "closed",
    ADMIN_SECTION,
    "Apply weights: Python disk or distributed update routes and group lifecycle; native "
    "sidecar init/start/update/finish routes when weight transfer is enabled. Weight version: "
    "`update_weight_version` changes metadata and can abort requests; it does not replace "
    "tensors. (The transport, an NCCL group with the trainer's ranks, is not exercised by this "
    "suite.)",
    ADMIN,
    asserts=(
        "the distributed update runs in its documented order and declares its version, the "
        "version-metadata route declares its version, and a call the worker cannot honour fails "
        "closed"
    ),
    flipped_by=(
        "distributed_update_fails_open",
        "distributed_update_without_group",
        "distributed_version_not_declared",
        "version_update_fails_open",
    ),
)

RESUME_SERVES_PROMPTLY = row(
    "admin.resume_serves_promptly",
    "A generation sent right after a resume is served promptly",
    REFRESH,
    "Pause or drain workers when the backend requires it. (Upstream: vLLM's resume_generation "
    "and SGLang's continue_generation reopen scheduling when they answer; a resume that answers "
    "while generation stays held passes every check of its answer.)",
    ADMIN,
    level=Level.SHOULD,
    asserts=(
        "a generation sent right after a resume is served within a bound the worker's own "
        "unpaused first-token time sets"
    ),
    flipped_by=("resume_slow",),
)

ROWS = (
    ROUTE_NEGOTIATION,
    SUCCESS_SEMANTICS,
    INVALID_PAUSE_MODE,
    PAUSE_CYCLES,
    STOPPED_WORKER_UNROUTED,
    UNPAUSED_UPDATE_REFUSED,
    VERSION_DECLARATION,
    DISTRIBUTED_UPDATE,
    RESUME_SERVES_PROMPTLY,
)
"""The rows in the order the matrix shows them."""
