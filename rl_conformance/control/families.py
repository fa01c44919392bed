"""The administration families: which routes a worker's family uses for each refresh step, with
which bodies, and how its replies name a weight version.

The backends do not share one administration schema ("Compare vLLM and SGLang Administration"),
and two vLLM deployments can expose different families:

* `vllm`: the Python worker (`dynamo.vllm --enable-rl`): `pause_generation` ... at
  `/engine/<name>`, replies carry `status`; weights from disk; pause defaults to `keep`.
* `vllm-sidecar`: the native sidecar: `control/*` and `update/*` routes following vLLM's RL API;
  pause defaults to `abort`, and `clear_cache` on the pause is how KV state is invalidated;
  weights arrive by a transfer (init once, then start, update*, finish with the version); the
  transfer routes are listed only when the engine has weight transfer enabled.
* `sglang`: SGLang's built-in routes, reached by URL (SGLang workers are not discovered); the
  weight update flushes the cache by default.

A worker's family is decided by what it advertises, never by the backend's name alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model.target import Target
from ..model.weight_transfer import WeightTransfer
from .admin import AdminWorker

SYNTHETIC_WEIGHTS = "/conformance/weights"
"""Our fakes derive toy weights from any path; a real engine needs real checkpoints
(`--update-model-path`, given twice so that consecutive updates really change the weights)."""


@dataclass(frozen=True)
class Call:
    route: str
    body: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NewWeights:
    """One policy to apply: its version and where its weights come from (a checkpoint path for
    disk updates, a transfer for the sidecar)."""

    version: str
    model_path: str | None = None
    transfer: WeightTransfer | None = None


def new_version() -> str:
    return f"conformance-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class AdminFamily:
    name: str
    marker: str
    """The advertised route that identifies the family."""
    pause: str
    resume: str
    pause_modes: tuple[str, ...]
    default_pause_mode: str
    update_kind: str
    """"disk" (a checkpoint path) or "transfer" (a weight transfer)."""
    update_routes: tuple[str, ...]
    required: tuple[str, ...]
    """What route negotiation requires of every worker of the family."""
    probe: str | None = None
    """A read-only route, called verbatim to prove advertised routes are served."""
    version: str | None = None
    version_key: str = "version"
    set_version: str | None = None
    set_version_key: str = ""
    flush: str | None = None
    clears_on_pause: bool = False
    """The pause itself invalidates KV state (`clear_cache`), there is no flush route."""
    setup_routes: tuple[str, ...] = ()
    """Update routes called once per worker before its first update."""
    info_routes: tuple[str, ...] = ()
    """Read-only routes a deployment may allowlist that report the weight version under
    `info_version_key`: where the family has no version route of its own, the version is read
    from the first of them the worker serves."""
    info_version_key: str = "weight_version"
    allowlisted_flush: str | None = None
    """A cache-reset route the deployment may allowlist where the family has none of its own
    (SGLang's `flush_cache` through `DYN_SGLANG_ENGINE_ROUTES`): called where it is the subject,
    never by a refresh."""
    rename_keeps: Mapping[str, Any] | None = None
    """What the version-metadata body adds to keep the requests in flight (SGLang:
    `abort_all_requests` false); None where the rename has no such choice."""
    update_pause: str | None = None
    """The pause mode of a refresh where the family's first mode would leave the cache the update
    flushes unflushable (None: the rule of `refresh_mode`)."""

    def pause_body(self, mode: str | None = None) -> dict[str, Any]:
        """The body of a pause in `mode` (the family's refresh mode when None)."""
        chosen = mode or self.refresh_mode
        body: dict[str, Any] = {"mode": chosen}
        if self.clears_on_pause:
            # vLLM ignores clear_cache when requests are kept in place.
            body["clear_cache"] = chosen != "keep"
        return body

    @property
    def refresh_mode(self) -> str:
        """The pause mode of a refresh: requests are held until the resume (the Python worker
        keeps them in place, SGLang retracts them to its queue), or, where the pause is what
        clears the cache, in-flight work drains first."""
        if self.update_pause is not None:
            return self.update_pause
        return "wait" if self.clears_on_pause else self.pause_modes[0]

    def setup_calls(self, weights: NewWeights) -> list[Call]:
        if self.update_kind == "transfer" and weights.transfer is not None:
            return [
                Call(
                    "update/init_weight_transfer_engine", {"init_info": weights.transfer.init_info}
                )
            ]
        return []

    def update_calls(self, weights: NewWeights) -> list[Call]:
        if self.update_kind == "transfer":
            transfer = weights.transfer or WeightTransfer.synthetic(weights.version)
            return [
                Call("update/start_weight_update"),
                *(
                    Call("update/update_weights", {"update_info": info})
                    for info in transfer.update_info
                ),
                Call("update/finish_weight_update", {"weight_version": weights.version}),
            ]
        path = weights.model_path or f"{SYNTHETIC_WEIGHTS}/{weights.version}"
        return [
            Call(self.update_routes[0], {"model_path": path, "weight_version": weights.version})
        ]

    def set_version_call(self, version: str, *, keep_requests: bool = False) -> Call | None:
        """The version-metadata call; `keep_requests`: asking to keep the requests in flight
        (`rename_keeps`), where the family's rename offers the choice."""
        if self.set_version is None:
            return None
        body = {self.set_version_key: version}
        if keep_requests and self.rename_keeps is not None:
            body.update(self.rename_keeps)
        return Call(self.set_version, body)

    def read_version(self, body: Any) -> Any:
        return body.get(self.version_key) if isinstance(body, Mapping) else None

    @property
    def update_path(self) -> list[str]:
        """Every route one refresh of this family calls."""
        routes = [self.pause, self.resume, *self.setup_routes, *self.update_routes]
        routes += [route for route in (self.flush, self.version) if route]
        return list(dict.fromkeys(routes))

    def missing_update_routes(self, worker: AdminWorker) -> list[str]:
        if worker.routes is None:
            return []
        return [r for r in (*self.setup_routes, *self.update_routes) if r not in worker.routes]


VLLM = AdminFamily(
    name="vllm",
    marker="pause_generation",
    pause="pause_generation",
    resume="resume_generation",
    pause_modes=("keep", "wait", "abort"),
    default_pause_mode="keep",
    update_kind="disk",
    update_routes=("update_weights_from_disk",),
    required=(
        "pause_generation",
        "resume_generation",
        "update_weights_from_disk",
        "flush_cache",
        "get_weight_version",
    ),
    probe="liveness_probe",
    version="get_weight_version",
    version_key="version",
    set_version="set_weight_version",
    set_version_key="weight_version",
    flush="flush_cache",
)
SIDECAR_TRANSFER = (
    "update/start_weight_update",
    "update/update_weights",
    "update/finish_weight_update",
)
VLLM_SIDECAR = AdminFamily(
    name="vllm-sidecar",
    marker="control/pause_generation",
    pause="control/pause_generation",
    resume="control/resume_generation",
    pause_modes=("keep", "wait", "abort"),
    default_pause_mode="abort",
    update_kind="transfer",
    update_routes=SIDECAR_TRANSFER,
    setup_routes=("update/init_weight_transfer_engine",),
    required=(
        "control/pause_generation",
        "control/resume_generation",
        "control/is_paused",
        "control/get_weight_version",
        "update/update_weight_version",
    ),
    probe="control/is_paused",
    version="control/get_weight_version",
    version_key="weight_version",
    set_version="update/update_weight_version",
    set_version_key="new_version",
    clears_on_pause=True,
)
SGLANG = AdminFamily(
    name="sglang",
    marker="pause_generation",
    pause="pause_generation",
    resume="continue_generation",
    pause_modes=("in_place", "retract", "abort"),
    default_pause_mode="abort",
    update_kind="disk",
    update_routes=("control/update_weights_from_disk",),
    required=(),
    set_version="control/update_weight_version",
    set_version_key="new_version",
    # a deployment exposes it only through DYN_SGLANG_ENGINE_ROUTES (0.5.21 has no
    # get_weight_version method); get_server_info also has a `weight_version`, but it is the
    # launch record's and never follows an update (`sglang/srt/entrypoints/engine.py`)
    info_routes=("get_model_info",),
    allowlisted_flush="flush_cache",
    rename_keeps={"abort_all_requests": False},
    # an update flushes the cache unless told not to (`flush_cache`, default true), and after an
    # `in_place` pause "any subsequent flush_cache call will be unsuccessful" (SGLang's RL guide,
    # docs/advanced_features/sglang_for_rl.md): 0.5.21 counts the last batch as running until
    # its scheduler loops again, so even an update right after the last answer can meet it
    # (fixtures/KNOWN_DIFFERENCES.md). `retract` returns running requests to the queue and
    # leaves the cache flushable; `in_place` is exercised where it is the subject.
    update_pause="retract",
)
FAMILIES: tuple[AdminFamily, ...] = (VLLM, VLLM_SIDECAR, SGLANG)
BY_NAME: Mapping[str, AdminFamily] = {family.name: family for family in FAMILIES}
DISCOVERED = (VLLM, VLLM_SIDECAR)
"""The families a worker listed by /v1/rl/workers can speak, told apart by their markers."""

TRANSFER_ALL_OR_NONE = ("update/init_weight_transfer_engine", *SIDECAR_TRANSFER)
"""The sidecar lists its weight-transfer routes together (weight transfer enabled) or not at
all; a partial set is a lifecycle no client can complete."""


def family_for(target: Target, worker: AdminWorker) -> AdminFamily | None:
    """The family a worker speaks: its advertised routes decide; SGLang workers advertise none."""
    if worker.routes is None:
        return SGLANG if target.backend == "sglang" else None
    return discovered_family(worker.routes)


def discovered_family(routes: Any) -> AdminFamily | None:
    if not isinstance(routes, list | tuple):
        return None
    for family in DISCOVERED:
        if family.marker in routes:
            return family
    return None


def update_unavailable(family: AdminFamily, worker: AdminWorker, missing: list[str]) -> str:
    if family.update_kind == "transfer":
        return (
            f"{worker.label} lists no complete weight-transfer route set (missing {missing}): the "
            "native sidecar lists them only when vLLM runs with weight transfer enabled "
            "(--weight-transfer-config)"
        )
    return f"{worker.label} does not advertise required route(s) {missing}"
