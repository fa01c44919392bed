"""Where the checkout's data folders are: `schemas/` and `suites/` sit beside the package in the
repository and are installed as `rl_conformance.schemas` and `rl_conformance.suites`. An
installed package (a wheel, an editable install) finds them as those subpackages; a bare
checkout on `sys.path`, with nothing installed, finds them beside the package."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]


def data_dir(name: str) -> Path:
    """The folder `name` (`schemas`, `suites`), installed or from the checkout."""
    try:
        return Path(str(resources.files(f"rl_conformance.{name}")))
    except ModuleNotFoundError:
        return CHECKOUT / name
