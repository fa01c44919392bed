"""A bearer token file followed through rotation (`--token-file` and its plane forms)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path


class TokenFile:
    """A token file followed through rotation: read again when its identity, size or time
    changes (kubelet swaps a projected token's symlink; a sidecar rewrites the file), each new
    token registered for redaction before it is sent. A read that finds no valid token (a file
    caught mid-write, removed) keeps the last one: the deployment then says whether it still
    takes it."""

    def __init__(self, path: Path, token: str, register: Callable[[str], object]) -> None:
        self.path, self.token, self.register = path, token, register
        self.stamp = self._stamp()
        self.lock = threading.Lock()

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            found = self.path.stat()
        except OSError:
            return None
        return found.st_ino, found.st_size, found.st_mtime_ns

    def __call__(self) -> str:
        stamp = self._stamp()
        if stamp is not None and stamp != self.stamp:
            with self.lock:
                try:
                    lines = self.path.read_text(encoding="utf-8").splitlines()
                except (OSError, UnicodeDecodeError):
                    lines = []
                token = (lines[0] if lines else "").strip()
                if token and bearer_characters(token):
                    self.register(token)
                    self.token, self.stamp = token, stamp
        return f"Bearer {self.token}"


def bearer_characters(token: str) -> bool:
    """Whether `token` can be sent as a bearer token: no spaces or control characters."""
    return not any(char.isspace() or ord(char) < 32 or ord(char) == 127 for char in token)
