"""A package face whose names load their module on first use.

A layer's ``__init__`` lists what it offers; importing the package (or one of its modules) must
not import the rest of it (the engine's face would otherwise pull aiohttp into ``fasteval
status``). ``lazy_face`` turns a module -> names table into the module's ``__getattr__`` and
``__all__``; the face repeats the imports under ``TYPE_CHECKING`` for the type checker.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_face(package: str, exports: Mapping[str, Sequence[str]]) -> tuple[Callable[[str], Any], list[str]]:
    """(``__getattr__``, ``__all__``) for ``package``, whose ``exports`` map a submodule (or a dotted
    module of a lower layer, re-exported) to its names."""
    where = {name: module if "." in module else f"{package}.{module}"
             for module, names in exports.items() for name in names}

    def getattr_(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(where[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return getattr_, sorted(where)
