"""The control layer: what the suites do to a deployment beyond one request: administration,
worker families, weight updates, the fleet, refresh, in-flight requests, the served-policy
reference, and the request builders the suites share (`requests`).

Submodules are imported by name; this package imports none of them, so that importing one
module never loads the rest."""

__all__ = [
    "admin",
    "admin_steps",
    "distributed",
    "each_worker",
    "families",
    "fleet",
    "inflight",
    "policy_reference",
    "refresh",
    "requests",
    "weights",
]
