"""Discovering the RL workers: the listener, its body, identity and probes.

The capability rows of this area, each declared once."""

from __future__ import annotations

from .kinds import COMPAT, DISCOVERY, REFRESH, RL_WORKERS, Level, row

PROTOCOL_VERSION = row(
    "discovery.protocol_version",
    "Discovery answers protocol version 1",
    DISCOVERY,
    "Check protocol_version before reading the worker list.",
    asserts="protocol_version is 1 before the worker list is read",
    flipped_by=("protocol_version_2",),
)

SCHEMA = row(
    "discovery.schema",
    "Discovery body matches the protocol v1 schema",
    DISCOVERY,
    "Optional fields such as model, system_url, admin_base_url, and world_size appear only when "
    "the worker provides them.",
    flipped_by=("optional_field_null", "rl_listener_gateway_body"),
)

LISTENER_ISOLATION = row(
    "discovery.listener_isolation",
    "Discovery is served on its own listener only",
    "Separate the Three Planes",
    "Discovery: RL listener, normally port 8001. The discovery endpoint is read-only.",
    level=Level.SHOULD,
    flipped_by=("rl_listener_on_frontend",),
)

WORKER_REGISTRATION = row(
    "discovery.worker_registration",
    "RL workers register with /v1/rl/workers",
    COMPAT,
    "`/v1/rl/workers` registration: vLLM RL-enabled workers; SGLang and TensorRT-LLM not "
    "currently registered",
    RL_WORKERS,
)

ROUTES = row(
    "discovery.routes",
    "Advertised routes are strings, sorted and unique",
    DISCOVERY,
    "`routes`: Worker-advertised Dynamo administration routes",
    RL_WORKERS,
    flipped_by=("routes_duplicated", "routes_unsorted"),
)

ENDPOINT_IDENTITY = row(
    "discovery.endpoint_identity",
    "Worker identity: request_plane_url and 64-bit instance ids",
    DISCOVERY,
    "`namespace`, `component`, `endpoint`, `instance_id`, `transport`, `request_plane_url`: "
    "Stable Dynamo endpoint identity",
    RL_WORKERS,
    flipped_by=("duplicate_instance_ids", "instance_id_rounded", "request_plane_url_mismatch"),
)

IDENTITY_NOT_POSITION = row(
    "discovery.identity_not_position",
    "Workers are identified by identity, not list position",
    DISCOVERY,
    "Do not cache membership indefinitely or interpret list position as worker identity.",
    RL_WORKERS,
    level=Level.SHOULD,
    flipped_by=("worker_identity_unstable",),
)

ERROR_FAILS_CLOSED = row(
    "discovery.error_fails_closed",
    "A worker with a probe error fails closed",
    DISCOVERY,
    "`error`: Probe failure; fail closed when a required worker or route is unavailable",
    RL_WORKERS,
    asserts="a worker with a probe error advertises no routes and no admin URL",
    flipped_by=("probe_error_with_routes",),
)

PROBE_REPLIES_VALIDATED = row(
    "discovery.probe_replies_validated",
    "A worker whose probe reply is refused or an error is listed with routes [] and its error",
    DISCOVERY,
    "`error`: Probe failure; fail closed when a required worker or route is unavailable. "
    "(Upstream ai-dynamo/dynamo lib/rl/src/lib.rs parse_worker_routes: a reply without a "
    "`routes` array, with a non-string or empty route, an invalid `world_size`, or "
    "`admin_base_url` without a valid `world_size` is a probe failure; a worker's own "
    '`{"status": "error", "message": M}` is listed as M; routes are sorted and de-duplicated.)',
    RL_WORKERS,
    flipped_by=("probe_reply_unvalidated", "probe_worker_error_replaced"),
)

PROBE_DEADLINE = row(
    "discovery.probe_deadline",
    "A worker that never answers its probe is listed with its error within the deadline",
    DISCOVERY,
    "`DYN_RL_REQUEST_TIMEOUT_SECS` (default `30`): Bounds each worker descriptor probe. "
    "Discovery can also return a worker with an `error` and an empty route list when its "
    "descriptor probe times out or fails. (Upstream RL Implementation Guide, discovery listener "
    "variables; ai-dynamo/dynamo lib/rl/src/lib.rs describe_worker.)",
    RL_WORKERS,
    flipped_by=("probe_deadline_ignored", "probe_timeout_fails_all"),
)

DEPARTURE_VISIBLE = row(
    "discovery.departure_visible",
    "A worker whose process stops leaves routing and is dropped or marked by discovery",
    REFRESH,
    "Keep generation gated when membership changes. (Dynamo 1.6.1 lists a stopped worker with "
    "`routes: []` and an `error` until its registration expires, and the frontend stops routing "
    "to it at once.)",
    asserts=(
        "a worker whose process stops is dropped from routing and dropped or marked by "
        "discovery, and listed again when it returns"
    ),
    flipped_by=("departed_worker_listed",),
)

ROWS = (
    PROTOCOL_VERSION,
    SCHEMA,
    LISTENER_ISOLATION,
    WORKER_REGISTRATION,
    ROUTES,
    ENDPOINT_IDENTITY,
    IDENTITY_NOT_POSITION,
    ERROR_FAILS_CLOSED,
    PROBE_REPLIES_VALIDATED,
    PROBE_DEADLINE,
    DEPARTURE_VISIBLE,
)
"""The rows in the order the matrix shows them."""
