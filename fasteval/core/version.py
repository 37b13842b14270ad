"""The installed fasteval version, read on first use (importlib.metadata costs ~60 ms)."""

from __future__ import annotations

from functools import cache


@cache
def fasteval_version() -> str:
    """The installed distribution's version; a source tree that was never installed says 0.1.0."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fasteval")
    except PackageNotFoundError:
        return "0.1.0"
