"""The ``fasteval`` command: ``main`` dispatches, each command lives in a module of its own.

The names below load their module on first use, so importing one part never imports the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fasteval.cli.main import main

_WHERE = {
    "main": "fasteval.cli.main",
}

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'fasteval.cli' has no attribute {name!r}")
