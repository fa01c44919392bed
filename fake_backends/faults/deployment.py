"""The catalogue of named contract violations and the set that is switched on.

Why faults: a conformance suite is only trustworthy if each of its checks has been seen
to fail.  Every fault breaks exactly one rule of the contract, deterministically, on every
request it applies to, so a test can switch it on and expect a specific check to fire.
Code consults the active set with ``faults.active("name")`` (the one idiom:
``faults.catalogue``); asking for a name that is not in the catalogue is a programming error
and raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fake_backends.faults.catalogue import ActiveFaults, Catalogue, Fault, UnknownFaultError
from fake_backends.faults.control_plane import CONTROL_PLANE_FAULTS
from fake_backends.faults.data_plane import DATA_PLANE_FAULTS

__all__ = [
    "CATALOGUE",
    "FAULTS",
    "FAULT_NAMES",
    "ActiveFaults",
    "Fault",
    "UnknownFaultError",
    "active_faults",
    "catalogue_lines",
]

CATALOGUE = Catalogue("fault", (*DATA_PLANE_FAULTS, *CONTROL_PLANE_FAULTS))
"""In two halves (`data_plane`, `control_plane`), in the order faults are listed."""

FAULTS: Mapping[str, Fault] = CATALOGUE.by_name
FAULT_NAMES: tuple[str, ...] = CATALOGUE.names
catalogue_lines = CATALOGUE.lines


def active_faults(names: Iterable[str] = ()) -> ActiveFaults:
    """The deployment faults switched on (validated)."""
    return ActiveFaults(CATALOGUE, names)
