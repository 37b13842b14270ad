"""Benchmark suites, each one place under this package; looked up by name, imported when named.

``SUITES["vistahop"]`` imports VistaHop's package on first lookup; nothing here imports a suite.
"""

from fasteval.suites.base import (
    SUITES,
    LoadError,
    Score,
    ScoreContext,
    Setting,
    Suite,
    has_tables,
    make_suite,
    register_suite,
    suites_with_tables,
)

__all__ = ["SUITES", "LoadError", "Score", "ScoreContext", "Setting", "Suite", "has_tables", "make_suite",
           "register_suite", "suites_with_tables"]
