"""The wire layer: bytes, SSE events, the terminal-state machine, the wire log (`exchange`),
metrics text. Standard library only; imports nothing of the harness above it.

Submodules are imported by name; this package imports none of them, so that importing one
module never loads the rest."""

__all__ = [
    "exchange",
    "prometheus",
    "sse",
    "stream_state",
]
