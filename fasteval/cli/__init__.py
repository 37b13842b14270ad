"""The ``fasteval`` command: ``main`` dispatches, each command lives in a module of its own.

The names below load their module on first use, so importing one part never imports the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fasteval.core.face import lazy_face

if TYPE_CHECKING:
    from fasteval.cli.main import main

__getattr__, __all__ = lazy_face("fasteval.cli", {
    "main": ("main",),
})
