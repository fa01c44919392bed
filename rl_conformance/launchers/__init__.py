"""Launchers: each produces a `Target` and stops exactly what it started."""

from __future__ import annotations

from .external import ExternalLauncher
from .fake import FakeLauncher

__all__ = ["ExternalLauncher", "FakeLauncher"]
