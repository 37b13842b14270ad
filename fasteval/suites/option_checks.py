"""Suite options several suites read the same way: ``fidelity`` and ``limit``.

A wrong value is a ValueError naming the suite and the value, raised when the suite is built,
so a bad config fails before any model is called.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FIDELITIES = ("reference", "fixed")


def fidelity_option(options: Mapping[str, Any], suite: str) -> str:
    """The ``fidelity`` option (default ``fixed``): ``reference`` or ``fixed``."""
    fidelity = str(options.get("fidelity", "fixed"))
    if fidelity not in FIDELITIES:
        raise ValueError(f"{suite}: fidelity must be one of {FIDELITIES}, got {fidelity!r}")
    return fidelity


def limit_option(options: Mapping[str, Any], suite: str) -> int | None:
    """The ``limit`` option: how many dataset rows to load, or None for all of them."""
    limit = options.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"{suite}: limit must be a non-negative integer or null, got {limit!r}")
    return limit
