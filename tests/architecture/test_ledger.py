"""A run's counts are kept in one place: ``fasteval/engine/ledger.py``.

Read from the source with ``ast``: an augmented assignment (``+=``, ``-=``), or an assignment of
the attribute from itself (``x.ok = x.ok - 1``), to an attribute named like one of the ledger's
counts (its fields and its Tally's, read from the classes) anywhere else in the package fails,
naming file and line. A count decremented at four exits is how the ledgers multiplied before.
"""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

from fasteval.engine.ledger import Ledger, Tally

ROOT = Path(__file__).resolve().parents[2]
LEDGER = "fasteval/engine/ledger.py"
COUNTS = {f.name for cls in (Ledger, Tally) for f in fields(cls)} - {"started_at", "models", "suites"}
"""The ledger's counts: planned, resumed, started, in_flight, ok, error, requeued, not_run, down,
errors_by, to_run."""
OTHER_COUNTS = {("fasteval/engine/forecast/dry_run.py", "resumed")}
"""(file, attribute) that counts something else under a ledger's word: the dry run's preview of a
plan that nothing runs."""


def _base_attribute(target: ast.expr) -> str | None:
    """``a.b.c`` -> ``c``; ``a.not_run[k]`` or ``a.errors_by[m][k][0]`` -> the attribute subscripted."""
    while isinstance(target, ast.Subscript):
        target = target.value
    return target.attr if isinstance(target, ast.Attribute) else None


def count_writes(path: Path) -> list[tuple[str, int]]:
    """(attribute, line) of every write of a count in ``path`` that changes it by arithmetic."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add | ast.Sub):
            name = _base_attribute(node.target)
            if name in COUNTS:
                found.append((name, node.lineno))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp) \
                and isinstance(node.value.op, ast.Add | ast.Sub):
            operands = {ast.unparse(node.value.left), ast.unparse(node.value.right)}
            for target in node.targets:
                name = _base_attribute(target)
                if name in COUNTS and ast.unparse(target) in operands:
                    found.append((name, node.lineno))
    return found


def stray_counts(root: Path) -> list[str]:
    stray = []
    for path in sorted((root / "fasteval").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == LEDGER:
            continue
        stray += [f"{rel}:{line}: {name}" for name, line in count_writes(path) if (rel, name) not in OTHER_COUNTS]
    return stray


def test_only_the_ledger_changes_a_count_of_the_run() -> None:
    stray = stray_counts(ROOT)
    assert not stray, "a run's count changed outside engine/ledger.py (add a Ledger method):\n  " + "\n  ".join(stray)


def test_the_ledger_itself_is_where_the_counts_change() -> None:
    names = {name for name, _ in count_writes(ROOT / LEDGER)}
    assert {"in_flight", "ok", "error", "requeued", "resumed", "not_run"} <= names
    assert "total" not in COUNTS  # derived (to_run - not run), never decremented


def _plant(tmp_path: Path, rel: str, text: str) -> Path:
    p = tmp_path / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return tmp_path


def test_a_planted_extra_decrement_is_named_with_file_and_line(tmp_path: Path) -> None:
    root = _plant(tmp_path, "fasteval/engine/steer/control.py",
                  "def cancel(self, model):\n    self.ledger.in_flight -= 1\n")
    _plant(tmp_path, "fasteval/engine/run/sweep.py",
           "def unrun(result):\n    result.ledger.not_run['drained'] += 1\n    t = 0\n    t -= 1\n")
    _plant(tmp_path, "fasteval/engine/run/admission.py", "def f(tally):\n    tally.error = tally.error - 1\n")
    _plant(tmp_path, "fasteval/engine/ledger.py", "def end(self):\n    self.in_flight -= 1\n")
    assert stray_counts(root) == ["fasteval/engine/run/admission.py:2: error",
                                  "fasteval/engine/run/sweep.py:2: not_run",
                                  "fasteval/engine/steer/control.py:2: in_flight"]
