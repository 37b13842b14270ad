"""Checks every dataset loader applies to a row: field types and where image paths may lead.

A dataset is untrusted input: a row with a wrong type must become that row's LoadError (naming
the line and field), never an exception that ends the loader and hides every later row; and an
image path must not read files outside the dataset's folder (``../../etc/hostname`` would be
copied into the run folder and sent to a model) unless the suite option ``allow_image_root``
names another folder that images may come from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ALLOW_OPTION = "allow_image_root"


class PathOutsideRoot(ValueError):
    """An image path that resolves outside every allowed folder."""


def image_roots(options: Mapping[str, Any], dataset_root: Path) -> tuple[Path, ...]:
    """The folders images may come from: the dataset's own, plus ``allow_image_root`` (a path or list)."""
    extra = options.get(ALLOW_OPTION)
    if extra is None:
        extras: list[Any] = []
    elif isinstance(extra, str | Path):
        extras = [extra]
    elif isinstance(extra, list) and all(isinstance(x, str) for x in extra):
        extras = list(extra)
    else:
        raise ValueError(f"option {ALLOW_OPTION} must be a folder path or a list of them, got {extra!r:.80}")
    return tuple(Path(p).expanduser().resolve() for p in [dataset_root, *extras])


def confine(path: Path, roots: Sequence[Path]) -> Path:
    """``path`` with symlinks and ``..`` resolved; PathOutsideRoot if it is under none of ``roots``."""
    resolved = path.expanduser().resolve()
    for root in roots:
        if resolved.is_relative_to(root):
            return resolved
    raise PathOutsideRoot(f"image path {str(path)[:200]!r} leads outside the dataset folder {roots[0]} "
                          f"(the suite option {ALLOW_OPTION} can allow another folder)")


def type_name(value: Any) -> str:
    """JSON's name for a value's type, for messages such as "expected a list, got number"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def is_scalar_answer(value: Any) -> bool:
    """A reference answer a scorer can compare: a string or a number (not a bool, null or object)."""
    return isinstance(value, str | int | float) and not isinstance(value, bool)
