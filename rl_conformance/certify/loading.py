"""Finding an adapter factory from `MODULE:FACTORY`, with errors that say what was wrong."""

from __future__ import annotations

import importlib
import os
import sys
from typing import cast

from ..errors import ConfigurationError
from .protocol import AdapterFactory


def load_factory(spec: str) -> AdapterFactory:
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(
            f"adapter: expected MODULE:FACTORY (e.g. my_rollouts.dynamo:make_adapter), got {spec!r}"
        )
    importable_here()
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"adapter: cannot import module {module_name!r}: {exc}") from exc
    factory = module
    for part in attribute.split("."):
        try:
            factory = getattr(factory, part)
        except AttributeError as exc:
            raise ConfigurationError(
                f"adapter: module {module_name!r} has no attribute {attribute!r}"
            ) from exc
    if not callable(factory):
        raise ConfigurationError(
            f"adapter: {spec!r} is a {type(factory).__name__}, expected a callable "
            "taking an AdapterContext"
        )
    return cast(AdapterFactory, factory)


def importable_here() -> None:
    """Modules in the working directory are importable, as under `python -m` (an installed
    console script puts only its own directory on `sys.path`): `certify-adapter
    examples.my_adapter:MyAdapter` works from a checkout's root, as docs/ADAPTERS.md says."""
    here = os.getcwd()
    if not any(os.path.abspath(entry or os.curdir) == here for entry in sys.path):
        sys.path.insert(0, here)
