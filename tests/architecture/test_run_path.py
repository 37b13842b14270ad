"""Every sweep starts through one door: ``fasteval/api.py`` (``claimed_run_folder``: preflight once,
the run folder created and locked, a failed start undone; ``run_planned`` and ``ClaimedRun.sweep``).

Read from the source with ``ast``: a module that imports the sweep's internals (``Sweep``,
``run_sweep``, or the sweep module itself, by any spelling) or names that module in a string
(``importlib``, a lazy face that serves them) anywhere else in the package fails, naming file and line. The engine's
face does not serve them either.
"""

from __future__ import annotations

import ast
from pathlib import Path

import fasteval.engine

ROOT = Path(__file__).resolve().parents[2]
SWEEP = "fasteval.engine.run.sweep"
INTERNALS = {"Sweep", "run_sweep"}
DOOR = {"fasteval/api.py", "fasteval/engine/run/sweep.py"}
"""The run path, and the sweep's own module."""


def _module(rel: str) -> list[str]:
    parts = rel.removesuffix(".py").split("/")
    return parts[:-1] if parts[-1] == "__init__" else parts


def sweep_starts(path: Path, rel: str) -> list[str]:
    """``line: what`` for each way ``path`` could start a sweep without the run path."""
    found: list[str] = []
    pkg = _module(rel)[:-1] if not rel.endswith("__init__.py") else _module(rel)
    tree = ast.parse(path.read_text(), rel)
    served: set[int] = set()  # a lazy face's key that serves only names outside INTERNALS (SweepResult)
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                names = {e.value for e in getattr(value, "elts", []) if isinstance(e, ast.Constant)}
                if isinstance(key, ast.Constant) and key.value == SWEEP and isinstance(value, ast.Tuple | ast.List) \
                        and len(names) == len(value.elts) and not names & INTERNALS:
                    served.add(id(key))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg[: len(pkg) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                if (base == SWEEP and alias.name in INTERNALS | {"*"}) or f"{base}.{alias.name}" == SWEEP:
                    found.append(f"{node.lineno}: imports {alias.name} from {base}")
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: imports {a.name}" for a in node.names if a.name == SWEEP]
        elif isinstance(node, ast.Constant) and node.value == SWEEP and id(node) not in served:
            found.append(f"{node.lineno}: names {SWEEP}")
    return found


def side_doors(root: Path) -> list[str]:
    bad = []
    for path in sorted((root / "fasteval").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel not in DOOR:
            bad += [f"{rel}:{hit}" for hit in sweep_starts(path, rel)]
    return bad


def test_every_sweep_starts_through_the_run_path() -> None:
    bad = side_doors(ROOT)
    assert not bad, "a sweep started outside fasteval/api.py's run path:\n  " + "\n  ".join(bad)


def test_the_engines_face_does_not_serve_the_sweeps_internals() -> None:
    assert not INTERNALS & set(fasteval.engine.__all__)
    assert "SweepResult" in fasteval.engine.__all__  # what a sweep returns is still public


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_a_sweep_started_outside_the_run_path_is_named_with_file_and_line(tmp_path: Path) -> None:
    root = _plant(tmp_path, {
        "fasteval/cli/estimate.py": "def pilot():\n    from fasteval.engine.run.sweep import run_sweep\n",
        "fasteval/engine/offline/watch.py": "from ..run import sweep\n\nasync def f(c, o):\n"
                                            "    return await sweep.Sweep(c, o).run()\n",
        "fasteval/engine/__init__.py": "lazy = {'fasteval.engine.run.sweep': ('Sweep',)}\n",
        "fasteval/engine/run/watch2.py": "from .sweep import Sweep, SweepResult\n",
        "fasteval/slurm/shard.py": "import importlib\nimportlib.import_module('fasteval.engine.run.sweep')\n",
        "fasteval/api.py": "from fasteval.engine.run.sweep import run_sweep\n",  # the door itself
        "fasteval/view/fine.py": "from fasteval.engine.run.sweep import SweepIncomplete, SweepResult\n"
                                 "face = {'fasteval.engine.run.sweep': ('SweepResult',)}\n",
    })
    assert side_doors(root) == [
        "fasteval/cli/estimate.py:2: imports run_sweep from fasteval.engine.run.sweep",
        "fasteval/engine/__init__.py:1: names fasteval.engine.run.sweep",
        "fasteval/engine/offline/watch.py:1: imports sweep from fasteval.engine.run",
        "fasteval/engine/run/watch2.py:1: imports Sweep from fasteval.engine.run.sweep",
        "fasteval/slurm/shard.py:2: names fasteval.engine.run.sweep",
    ]
