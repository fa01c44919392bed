"""tests/dynamo: make ``dynamo_stack`` (the shared real-Dynamo stack helpers) and the
repository root importable, as tests/fake_backends does for its helpers."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for entry in (str(_HERE.parents[1]), str(_HERE)):
    if entry not in sys.path:
        sys.path.insert(0, entry)
