"""The certification fleets: one per administration family an adapter can drive, each a fake
deployment the scenarios run over and the facts the checklist judges its refresh by.

The backends do not share one administration schema ("Compare vLLM and SGLang Administration"),
so what "pause", "apply one policy", "invalidate stale KV state" and "verify every worker" look
like on the wire depends on the family:

* `vllm`: the Python worker. Discovered; `pause_generation` (keep), `update_weights_from_disk`
  with the checkpoint path, `flush_cache`, `get_weight_version`, `resume_generation`; replies
  carry `status`.
* `vllm-sidecar`: the native sidecar with weight transfer enabled. Discovered; the pause with
  `clear_cache` is what invalidates KV state (there is no flush route); weights arrive by
  `update/init_weight_transfer_engine` (once), `start_weight_update`, `update_weights`,
  `finish_weight_update` carrying the version; `control/get_weight_version` reads it back.
* `sglang`: SGLang workers are "not currently registered": the deployment supplies trusted
  worker URLs. Built-in `control/update_weights_from_disk` (which flushes the cache unless told
  `flush_cache: false`), native `pause_generation` / `continue_generation`, and the deployment's
  allowlist (`DYN_SGLANG_ENGINE_ROUTES`) adding `flush_cache` and `get_weight_version`, whose
  results arrive wrapped as `{"result": ...}`; built-in update replies carry `success` and
  `message`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fake_backends.admin.sglang import (
    BUILT_IN_ROUTES,
    ENGINE_METHODS,
    NATIVE_ROUTES,
    resolve_engine_routes,
)
from fake_backends.admin.sglang_routes import EngineRouteError, parse_engine_routes

from ..control.families import SGLANG, VLLM, VLLM_SIDECAR, AdminFamily
from ..errors import ConfigurationError

SGLANG_ALLOWLIST = ("flush_cache", "get_weight_version")
"""The engine routes the SGLang certification fleet allowlists unless told otherwise, as a
deployment that lets its trainer flush and read versions would (`--engine-route` /
`DYN_SGLANG_ENGINE_ROUTES`)."""
MODEL = "toy"
"""The model name the certification fleets serve unless told otherwise."""


@dataclass(frozen=True)
class CertificationFleet:
    name: str
    family: AdminFamily
    backend: str
    """The fake deployment's backend."""
    options: Mapping[str, Any]
    """Keyword options of the fake deployment."""
    discovered: bool
    """Workers are listed by `/v1/rl/workers`; otherwise the adapter is handed worker URLs."""
    update: str
    """The call that applies one policy to a worker."""
    version: str
    version_key: str
    invalidation: str
    """How the family invalidates stale KV state, in words for a finding."""
    read_only: frozenset[str]
    flush: str | None = None
    """The route that flushes the cache, where the family has one."""
    served: tuple[str, ...] = ()
    """The routes an undiscovered family's workers serve (nothing advertises them)."""
    pause_clears: bool = False
    """The pause accepts `clear_cache` (vLLM's Python worker and native sidecar)."""
    flushes_on_update: bool = False
    """The update route flushes the cache itself, unless its body turns that off."""
    update_flush_flag: str | None = "flush_cache"
    """The update body's field that can turn the update's own flush off (None: nothing can)."""
    notes: tuple[str, ...] = field(default=())
    model: str = MODEL
    """The name the fleet serves its model under."""
    engine_routes: tuple[str, ...] = ()
    """The deployment's SGLang engine-route allowlist, as descriptors (`path[=method]
    [:engine|tm]`); empty for the other families."""

    @property
    def pause(self) -> str:
        return self.family.pause

    @property
    def resume(self) -> str:
        return self.family.resume

    @property
    def update_path(self) -> frozenset[str]:
        """What a worker must advertise before a refresh may mutate it."""
        routes = {self.pause, self.resume, self.update, self.version, *self.family.setup_routes}
        routes.update(self.family.update_routes)
        if self.flush is not None:
            routes.add(self.flush)
        return frozenset(routes)

    def applies(self, route: str | None, body: Any, version: str, model_path: str) -> bool:
        """This call applies the policy named `version` (weights at `model_path`)."""
        if route != self.update or not isinstance(body, Mapping):
            return False
        if self.family.update_kind == "transfer":
            return body.get("weight_version") == version
        return body.get("model_path") == model_path

    def clears_on_pause(self, route: str | None, body: Any) -> bool:
        """This pause clears the cache before the update: `clear_cache` in a mode that does not
        keep requests in place (vLLM ignores it in `keep`); nothing runs until the resume."""
        body = body if isinstance(body, Mapping) else {}
        return (
            self.pause_clears
            and route == self.pause
            and body.get("clear_cache") is True
            and body.get("mode", self.family.default_pause_mode) != "keep"
        )

    def flushes(self, route: str | None, body: Any) -> bool:
        """This call flushes the cache (after an update, it invalidates what the old weights
        computed)."""
        body = body if isinstance(body, Mapping) else {}
        if self.flush is not None and route == self.flush:
            return True
        return (
            self.flushes_on_update
            and route == self.update
            and (self.update_flush_flag is None or body.get(self.update_flush_flag) is not False)
        )

    def refused(self, status: int | None, reply: Any) -> bool:
        """The worker refused the call: a non-200 status, or a body naming a failure in either
        of the two success shapes ("check both HTTP status and body")."""
        if status != 200:
            return True
        if not isinstance(reply, Mapping):
            return False
        if reply.get("success") is False or reply.get("status") == "error":
            return True
        # The Python worker's routes answer `ok`; the sidecar's name their state ("paused").
        return self.name == "vllm" and reply.get("status") not in ("ok", None)

    def failure_reply(self, route: str) -> dict[str, Any]:
        """A 200 reply by which a worker of this family reports that `route` failed."""
        message = f"{route} failed (injected)"
        if self.name == "sglang" and route.startswith("control/"):
            return {"success": False, "message": message}
        return {"status": "error", "message": message}

    def read_version(self, reply: Any) -> Any:
        return reply.get(self.version_key) if isinstance(reply, Mapping) else None


VLLM_FLEET = CertificationFleet(
    name="vllm",
    family=VLLM,
    backend="vllm",
    options={},
    discovered=True,
    update="update_weights_from_disk",
    version="get_weight_version",
    version_key="version",
    invalidation="update_weights_from_disk (1.6.1 resets the prefix cache on every disk "
    "update), flush_cache after the update, or a pause with clear_cache (mode wait or abort)",
    read_only=frozenset({"get_weight_version", "liveness_probe"}),
    flush="flush_cache",
    pause_clears=True,
    flushes_on_update=True,
    update_flush_flag=None,
)
SIDECAR_FLEET = CertificationFleet(
    name="vllm-sidecar",
    family=VLLM_SIDECAR,
    backend="vllm",
    options={"admin_family": "sidecar"},
    discovered=True,
    update="update/finish_weight_update",
    version="control/get_weight_version",
    version_key="weight_version",
    invalidation="control/pause_generation with clear_cache true, in a mode other than keep",
    read_only=frozenset({"control/get_weight_version", "control/is_paused", "control/is_sleeping"}),
    pause_clears=True,
)


def sglang_fleet(engine_routes: Sequence[str] = SGLANG_ALLOWLIST) -> CertificationFleet:
    """The SGLang fleet of a deployment whose engine-route allowlist is `engine_routes`: the
    built-in and native routes every worker serves, the allowlisted paths, and the flush and
    version reads where the allowlist exposes them."""
    try:
        descriptors = parse_engine_routes(list(engine_routes))
    except EngineRouteError as exc:
        raise ConfigurationError(f"--engine-route: {exc}") from exc
    try:
        resolve_engine_routes(descriptors)
    except EngineRouteError as exc:
        raise ConfigurationError(
            f"--engine-route: the certification fleet cannot stage this allowlist ({exc}); its "
            f"SGLang engine has the methods {', '.join(sorted(ENGINE_METHODS))}"
        ) from exc
    by_method = {d.method: d.path for d in descriptors}
    allowlisted = tuple(d.path for d in descriptors)
    version = by_method.get("get_weight_version", "get_weight_version")
    return CertificationFleet(
        name="sglang",
        family=SGLANG,
        backend="sglang",
        options={"engine_routes": tuple(engine_routes)},
        discovered=False,
        update="control/update_weights_from_disk",
        version=version,
        version_key="result",
        invalidation="control/update_weights_from_disk without flush_cache false"
        + (f", or {by_method['flush_cache']}" if "flush_cache" in by_method else ""),
        read_only=frozenset({version}),
        flush=by_method.get("flush_cache"),
        served=tuple(dict.fromkeys((*NATIVE_ROUTES, *BUILT_IN_ROUTES, *allowlisted))),
        flushes_on_update=True,
        notes=(
            "SGLang workers are not registered with /v1/rl/workers: the adapter is handed the "
            "deployment's worker URLs (AdapterContext.worker_urls)",
            "the deployment allowlists "
            + (", ".join(engine_routes) if engine_routes else "no engine route"),
        ),
        engine_routes=tuple(engine_routes),
    )


def with_facts(
    fleet: CertificationFleet,
    engine_routes: Sequence[str] | None = None,
    model: str | None = None,
) -> CertificationFleet:
    """`fleet` as the author's deployment is: its SGLang engine-route allowlist and its served
    model name, where given."""
    if engine_routes is not None:
        if fleet.name != "sglang":
            raise ConfigurationError(
                f"--engine-route: an SGLang deployment's allowlist; the {fleet.name} family has "
                "none (give --family sglang)"
            )
        fleet = replace(sglang_fleet(engine_routes), model=fleet.model)
    if model is not None:
        if not model.strip():
            raise ConfigurationError("--served-model: expected a model name, observed ''")
        fleet = replace(fleet, model=model)
    return fleet


SGLANG_FLEET = sglang_fleet()
FLEETS: Mapping[str, CertificationFleet] = {
    fleet.name: fleet for fleet in (VLLM_FLEET, SIDECAR_FLEET, SGLANG_FLEET)
}
