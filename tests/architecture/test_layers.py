"""The package's floor plan holds: no import cycle, no import from a lower layer up to a higher one.

The rule is written once, in LAYERS below (and drawn in docs/architecture.md). Imports are read
from the source with ``ast``: module level and inside functions alike (a lazy import is still a
dependency), but not those under ``if TYPE_CHECKING:`` (they never run).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("fasteval", "providers", "sandbox", "cache")

# Top to bottom: each entry is one floor, a floor holds one or more layers (siblings, which never
# import each other), a layer is one or more package prefixes. A module may import its own layer
# and any floor below its own. "=fasteval" is the package face itself, not everything under it.
LAYERS: tuple[tuple[tuple[str, ...], ...], ...] = (
    (("=fasteval", "fasteval.api", "fasteval.cli", "fasteval.slurm"),),  # the face
    (("fasteval.engine",), ("fasteval.view",)),
    (("fasteval.trackers",),),  # the experiment trackers: the sweep's live log_to and export --to share them
    (("fasteval.config",),),
    (("fasteval.suites",),),
    (("fasteval.tools",),),
    (("fasteval.images",), ("fasteval.services",)),
    (("fasteval.store",),),
    (("fasteval.runfolder",),),
    (("providers",), ("sandbox",), ("cache",)),
    (("fasteval.core",),),
)


def layer_of(module: str) -> tuple[int, int]:
    """(floor, layer on that floor) of a dotted module: the layer with the longest matching prefix."""
    best: tuple[int, int, int] | None = None
    for floor, layers in enumerate(LAYERS):
        for i, prefixes in enumerate(layers):
            for prefix in prefixes:
                exact = prefix.startswith("=")
                name = prefix.lstrip("=")
                hit = module == name or (not exact and module.startswith(name + "."))
                if hit and (best is None or len(name) > best[2]):
                    best = (floor, i, len(name))
    if best is None:
        raise AssertionError(f"{module} is in no layer: add its folder to LAYERS")
    return best[0], best[1]


def _name(where: tuple[int, int]) -> str:
    return "/".join(p.lstrip("=") for p in LAYERS[where[0]][where[1]])


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    path: Path
    line: int


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                for inner in ast.walk(sub):
                    if hasattr(inner, "lineno"):
                        lines.add(inner.lineno)
    return lines


def imports_of(path: Path, root: Path, known: set[str]) -> Iterator[Edge]:
    """Every import of our own packages in one file, resolved to the modules it names."""
    src = module_name(path, root)
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_lines(tree)
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(tree):
        if node.lineno in skip if hasattr(node, "lineno") else False:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = src.split(".") if is_pkg else src.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join([*pkg, base] if base else pkg)
            # ``from pkg import sub`` names the submodule when there is one
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for t in targets:
            if t.split(".")[0] in PACKAGES and t != src:
                yield Edge(src, t, path, node.lineno)


def all_edges(root: Path = ROOT) -> list[Edge]:
    files = [p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))]
    known = {module_name(p, root) for p in files}
    return [e for p in files for e in imports_of(p, root, known)]


def upward_imports(edges: list[Edge]) -> list[str]:
    bad = []
    for e in edges:
        src, dst = layer_of(e.src), layer_of(e.dst)
        if src == dst or dst[0] > src[0]:
            continue
        what = "a sibling layer" if dst[0] == src[0] else "a higher layer"
        bad.append(f"{e.path.relative_to(ROOT)}:{e.line}: {e.src} ({_name(src)}) imports {e.dst} ({_name(dst)}), "
                   f"{what}")
    return sorted(set(bad))


def cycles(edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.src, set()).add(e.dst)
        graph.setdefault(e.dst, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_runs_up_the_layers() -> None:
    bad = upward_imports(all_edges())
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_the_package_has_no_import_cycle() -> None:
    found = cycles(all_edges())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


# The engine's rooms, top to bottom, the same way: a room imports its own room and the floors below.
ENGINE_FLOORS: tuple[tuple[str, ...], ...] = (
    ("fasteval.engine.offline",),
    ("fasteval.engine.run",),
    ("fasteval.engine.steer", "fasteval.engine.batch", "fasteval.engine.forecast"),
    ("fasteval.engine",),  # its floor: plan.py, ledger.py and the face
)


def engine_room(module: str) -> tuple[int, str]:
    """(floor, room) of an engine module: the longest room prefix that names it."""
    for floor, rooms in enumerate(ENGINE_FLOORS):
        for room in rooms:
            if room != "fasteval.engine" and (module == room or module.startswith(room + ".")):
                return floor, room
    return len(ENGINE_FLOORS) - 1, "fasteval.engine"


def engine_back_imports(edges: list[Edge]) -> list[str]:
    bad = []
    for e in edges:
        if not (e.src.startswith("fasteval.engine.") and e.dst.startswith("fasteval.engine")):
            continue
        if e.dst == "fasteval.engine":  # the face serves names lazily from every room
            continue
        (sf, sr), (df, dr) = engine_room(e.src), engine_room(e.dst)
        if sr == dr or df > sf:
            continue
        what = "a sibling room" if df == sf else "a higher room"
        bad.append(f"{e.path.relative_to(ROOT)}:{e.line}: {e.src} imports {e.dst} ({dr}), {what}")
    return sorted(set(bad))


def test_no_import_runs_up_the_engines_rooms() -> None:
    bad = engine_back_imports(all_edges())
    assert not bad, "imports against the engine's rooms:\n" + "\n".join(bad)


def test_a_planted_engine_back_import_is_named(tmp_path: Path) -> None:
    root = _planted(tmp_path, {"fasteval/engine/steer/control.py": "from fasteval.engine.run.progress import X\n",
                               "fasteval/engine/run/progress.py": "X = 1\n",
                               "fasteval/engine/batch/batching.py": "from fasteval.engine.forecast import estimate\n",
                               "fasteval/engine/forecast/estimate.py": ""})
    global ROOT
    saved, ROOT = ROOT, root
    try:
        bad = engine_back_imports(all_edges(root))
    finally:
        ROOT = saved
    assert len(bad) == 2
    assert "fasteval/engine/batch/batching.py:1" in bad[0] and "a sibling room" in bad[0]
    assert "fasteval/engine/steer/control.py:1" in bad[1] and "a higher room" in bad[1]


def test_every_module_is_in_a_layer() -> None:
    for e in all_edges():
        layer_of(e.src)
        layer_of(e.dst)


def _planted(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


@pytest.mark.parametrize(("files", "expect"), [
    ({"fasteval/core/types.py": "from fasteval.engine.run.sweep import Sweep\n",
      "fasteval/engine/run/sweep.py": "Sweep = 1\n"}, "fasteval/core/types.py:1"),
    ({"fasteval/view/report.py": "def f():\n    from fasteval.engine import sweep\n",
      "fasteval/engine/run/sweep.py": ""}, "a sibling layer"),
    ({"cache/_keys.py": "from providers.base import ChatRequest\n", "providers/base.py": ""}, "cache._keys"),
    ({"fasteval/engine/offline/watch.py": "def f():\n    from fasteval.api import run_planned\n",  # the run path's owner
      "fasteval/api.py": ""}, "fasteval/engine/offline/watch.py:2"),
])
def test_a_planted_back_import_is_named_with_file_and_line(tmp_path: Path, files: dict[str, str],
                                                             expect: str) -> None:
    root = _planted(tmp_path, files)
    global ROOT
    saved, ROOT = ROOT, root
    try:
        bad = upward_imports(all_edges(root))
    finally:
        ROOT = saved
    assert bad and expect in bad[0]


def test_a_planted_cycle_is_found(tmp_path: Path) -> None:
    root = _planted(tmp_path, {"fasteval/config/load.py": "from fasteval.config.schema import x\n",
                               "fasteval/config/schema.py": "def f():\n    from fasteval.config import load\n"})
    assert cycles(all_edges(root)) == [["fasteval.config.load", "fasteval.config.schema"]]


def test_type_checking_imports_are_not_dependencies(tmp_path: Path) -> None:
    root = _planted(tmp_path, {"fasteval/core/types.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                                         "    from fasteval.engine.run.sweep import Sweep\n",
                               "fasteval/engine/run/sweep.py": ""})
    assert all_edges(root) == []
