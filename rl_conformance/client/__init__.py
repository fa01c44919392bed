"""The client layer: the only code that speaks HTTP to a deployment (`http.Client`), its breaker,
the reproducers, the example budget.

Submodules are imported by name; this package imports none of them, so that importing one
module never loads the rest."""

__all__ = [
    "breaker",
    "budget",
    "codings",
    "dial",
    "http",
    "http11",
    "httpx_wire",
    "identity",
    "network",
    "pool",
    "progress",
    "reproducers",
]
