"""Generation routes a Dynamo deployment serves only when its operator turns them on, which the
certification fleet does not stage.

A client that generates through such a route is right on a deployment that serves it: the
kit's fleet answering it 404 is no defect of the client, so what hangs on those rollouts is not
judged, and the run names the route and the flag that serves it. A route no deployment of the
family serves (SGLang's native `/generate` without `stream`, which the Dynamo frontend answers
501) is not among them: a client that depends on it fails."""

from __future__ import annotations

from .audit import FRONTEND
from .evidence import Evidence

OPT_IN_ROUTES: dict[str, tuple[str, str]] = {
    "/inference/v1/generate": (
        "vllm",
        "vLLM's native generate route, which a Dynamo vLLM worker serves only when started with "
        "DYN_VLLM_ENABLE_INFERENCE_V1_GENERATE=1 (documented experimental; "
        "fixtures/KNOWN_DIFFERENCES.md)",
    ),
}
"""Path -> (the backend whose workers can serve it, what turns it on)."""


def not_staged_route(evidence: Evidence) -> str | None:
    """Why the generation items cannot be judged on the certification fleet: the client sent its
    rollouts to a route the fleet does not serve and a deployment of this backend serves when
    told to; None where it sent none there, or the fleet served it."""
    for record in evidence.records:
        path = record.path.split("?", 1)[0]
        if record.plane != FRONTEND or record.method != "POST" or path not in OPT_IN_ROUTES:
            continue
        backend, served_by = OPT_IN_ROUTES[path]
        if backend == evidence.fleet.backend and record.status == 404:
            return (
                f"the client generates through POST {path}, {served_by}; the certification "
                f"fleet does not serve it ({record.summary()}), so its rollouts are judged only "
                "on a deployment that does"
            )
    return None
