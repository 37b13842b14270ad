"""The names model code starts with, per fidelity and tool.

``reference`` rebuilds the VisualToolBench harness (scripts/tools.py) as observed: a restricted
``__builtins__`` dict, separate globals and locals, a ``SafeImage`` wrapper whose static ``open``
calls ``PIL.Image.Image.open`` (which does not exist, so it raises AttributeError, as on a real
PIL), a pyplot proxy with a no-op ``show``. ``fixed`` gives full builtins, one namespace, the real
PIL ``Image`` module and the input file names, which is what a model reasonably expects.
"""

from __future__ import annotations

import builtins
import importlib
from pathlib import Path
from typing import Any

import cv2
import matplotlib.pyplot as plt
import numpy as np
from PIL import Image

REFERENCE_BUILTINS = (
    "print", "range", "len", "min", "max", "abs", "float", "int", "str", "list", "dict", "set",
    "tuple", "enumerate", "zip", "map", "filter", "__import__",
)  # fmt: skip


class SafeImage:
    """The reference harness's ``Image``: delegates to a PIL image, ``show`` does nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._image = Image.Image(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._image, name)

    def show(self, *args: Any, **kwargs: Any) -> None:
        pass

    @staticmethod
    def open(*args: Any, **kwargs: Any) -> SafeImage:
        # Faithful to the harness: PIL's Image class has no ``open``, so this raises AttributeError.
        img = Image.Image.open(*args, **kwargs)  # type: ignore[attr-defined]
        safe = SafeImage()
        safe._image = img
        return safe


class SafePyplot:
    """The reference harness's ``plt``: pyplot with a no-op ``show``."""

    def __getattr__(self, name: str) -> Any:
        return getattr(plt, name)

    def show(self, *args: Any, **kwargs: Any) -> None:
        pass


# python_interpreter pre-binds these in the reference; packages missing here are left unbound.
_INTERPRETER_IMPORTS = (
    ("pandas", "pandas", None), ("pd", "pandas", None), ("requests", "requests", None),
    ("scipy", "scipy.stats", None), ("sklearn", "sklearn", None), ("simpy", "simpy", None),
    ("tabulate", "tabulate", "tabulate"), ("BeautifulSoup", "bs4", "BeautifulSoup"),
)  # fmt: skip
_optional_cache: dict[str, Any] = {}


def _optional_names() -> dict[str, Any]:
    if not _optional_cache:
        for name, module, attr in _INTERPRETER_IMPORTS:
            try:
                mod = importlib.import_module(module)
            except Exception:  # an absent optional package must not break the tool
                continue
            _optional_cache[name] = getattr(mod, attr) if attr else mod
        _optional_cache.setdefault("__loaded__", True)
    return {k: v for k, v in _optional_cache.items() if k != "__loaded__"}


def reference_namespace(tool: str, save_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(globals, locals) exactly as the harness builds them for one call."""
    restricted = {name: getattr(builtins, name) for name in REFERENCE_BUILTINS}
    globals_: dict[str, Any] = {"__builtins__": restricted}
    if tool == "interpreter":
        globals_.update({"np": np, **_optional_names(), "Image": SafeImage, "plt": SafePyplot()})
    else:
        globals_.update(
            {"Image": SafeImage, "np": np, "cv2": cv2, "plt": SafePyplot(), "PROCESSED_IMAGE_SAVE_PATH": save_dir}
        )
    return globals_, {}


def fixed_namespace(save_dir: Path, inputs: list[str]) -> dict[str, Any]:
    """One namespace with full builtins and the usual imports already bound."""
    return {
        "__name__": "__main__",
        "__builtins__": builtins,
        "np": np,
        "cv2": cv2,
        "plt": plt,
        "Image": Image,
        "PROCESSED_IMAGE_SAVE_PATH": save_dir,
        "INPUT_IMAGES": list(inputs),
    }
