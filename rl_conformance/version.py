"""The suite's version, recorded in every report."""

__version__ = "0.1.0"
