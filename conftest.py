"""Root pytest wiring: hypothesis profiles for the suite's own tests.

`HYPOTHESIS_PROFILE=thorough pytest` runs the property tests with ten times the examples.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
