"""Every declared dependency is used, and the libraries we replaced stay out of the product.

pyproject's main dependencies must each be imported somewhere in our packages (aiosqlite sat there
for months, imported nowhere). The ``bench`` extra holds what we replaced (aiosqlite, tenacity):
only ``benchmarks/`` may import it, to measure it against our own code.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterable, Iterator
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("fasteval", "providers", "sandbox", "cache")

NOT_IMPORTED = {"pyvips-binary": "libvips itself, which pyvips loads when it is imported"}
"""Declared dependencies that are used without an import statement naming them, and why."""


def _dist(requirement: str) -> str:
    """``"opencv-python-headless>=4.8"`` -> ``"opencv-python-headless"`` (PEP 503 normalised)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert name is not None, requirement
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


def _imported_modules(files: Iterable[Path]) -> set[str]:
    """Top-level names of every absolute import in ``files`` (lazy and TYPE_CHECKING ones included)."""
    out: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.add(node.module.split(".")[0])
    return out


def _sources(*folders: str) -> Iterator[Path]:
    for folder in folders:
        yield from (ROOT / folder).rglob("*.py")


@cache
def _installed() -> dict[str, set[str]]:
    """Import name -> the distributions providing it, for everything installed here."""
    return {mod: {_dist(d) for d in dists} for mod, dists in packages_distributions().items()}


def _modules_of(dist: str) -> set[str]:
    """The import names a distribution provides (its own name when it is not installed here)."""
    names = {mod for mod, dists in _installed().items() if dist in dists}
    return names or {dist.replace("-", "_")}


def _project() -> dict[str, list[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {"main": data["dependencies"], **data["optional-dependencies"]}


def test_every_main_dependency_is_imported_by_our_packages() -> None:
    imported = _imported_modules(_sources(*PACKAGES))
    unused = sorted(d for d in map(_dist, _project()["main"])
                    if d not in NOT_IMPORTED and not _modules_of(d) & imported)
    assert not unused, f"declared in pyproject.toml but imported nowhere in {', '.join(PACKAGES)}: {unused}"


def test_replaced_libraries_are_imported_only_by_benchmarks() -> None:
    bench = [_dist(r) for r in _project()["bench"]]
    assert {"aiosqlite", "tenacity"} <= set(bench)
    in_product = _imported_modules(_sources(*PACKAGES, "tests"))
    in_benchmarks = _imported_modules(_sources("benchmarks"))
    for dist in bench:
        mods = _modules_of(dist)
        assert not mods & in_product, f"{dist} is in the bench extra, yet our code imports {mods & in_product}"
        assert mods & in_benchmarks, f"{dist} is in the bench extra but no benchmark imports it"
