"""Calls to engine routes the staged deployment does not serve, for a family whose workers
advertise nothing (SGLang: the deployment supplies worker URLs and allowlists its engine routes).

Such a call is the client's defect only where no deployment could serve it. An SGLang worker
behind Dynamo binds each `/engine/<path>` to the one method its allowlist names
(`path[=method][:engine|tm]`) and "the request body can never choose the method"; a client that
expects one path to run whichever method its body names (`{"method": ...}`, a tokenizer-manager
passthrough that neither Dynamo 1.6.1 nor 1.7.0 registers) fails route negotiation. Any other
unserved path may be served by the author's deployment: the kit's choice of allowlist is not the
client's defect, and what hangs on that call is not judged (the run says which flag describes
the deployment)."""

from __future__ import annotations

from .audit import AuditRecord
from .evidence import Evidence


def unserved(evidence: Evidence) -> list[AuditRecord]:
    """Worker calls to engine routes the staged deployment does not serve (none where discovery
    advertises the routes: calling an unadvertised route is then the client's own defect)."""
    if evidence.fleet.discovered:
        return []
    served = set(evidence.fleet.served)
    return [r for r in evidence.records if r.route is not None and r.route not in served]


def body_method(record: AuditRecord) -> str | None:
    """The method a call's body names for the worker to run, if it names one."""
    body = record.body if isinstance(record.body, dict) else {}
    method = body.get("method")
    return method if isinstance(method, str) else None


def negotiation_failure(record: AuditRecord) -> str:
    return (
        f"route {record.route} is served by no Dynamo SGLang worker: the client expects it to run "
        f"the method its body names ({body_method(record)}), but each /engine path runs the one "
        "method the deployment's allowlist binds to it (path[=method][:engine|tm]) and the body "
        "never chooses it (Dynamo 1.6.1 and 1.7.0 register no such passthrough)"
    )


def not_judged(evidence: Evidence) -> str | None:
    """Why the refresh items cannot be judged on this staged deployment: the client depends on
    an engine route the author's deployment may serve and this one does not."""
    for record in unserved(evidence):
        if body_method(record) is None:
            allowlist = ", ".join(evidence.fleet.engine_routes) or "none"
            return (
                f"the client called /engine/{record.route}, which this staged deployment does "
                f"not serve (its engine-route allowlist: {allowlist}); if the client's "
                f"deployment allowlists it, describe that deployment with certify-adapter "
                f"--engine-route {record.route}[=METHOD][:engine|tm]"
            )
    return None
