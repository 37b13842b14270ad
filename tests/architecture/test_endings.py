"""A trajectory's ending is written in one place: ``Trajectory.end``, for the agent's endings and
the job's errors alike; the record copies it once the job is over (``engine/run/job.py``).

Read from the source with ``ast``: any assignment to a ``termination`` or ``termination_reason``
attribute elsewhere in the package fails, naming file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {("fasteval/core/types.py", "end"), ("fasteval/engine/run/job.py", "_finished")}
"""(file, function) that may assign a termination: the trajectory's one writer, and the record's copy."""


def _assigned_attributes(node: ast.AST) -> list[str]:
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    names = []
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Attribute):
                names.append(sub.attr)
    return names


def _writers(path: Path) -> list[tuple[str, int]]:
    """(enclosing function, line) of each assignment to a termination attribute in ``path``."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name)
                continue
            if {"termination", "termination_reason"} & set(_assigned_attributes(child)):
                found.append((function, child.lineno))
            visit(child, function)

    visit(ast.parse(path.read_text(), str(path)), "<module>")
    return found


def test_a_termination_is_written_only_by_trajectory_end() -> None:
    stray = []
    for path in sorted((ROOT / "fasteval").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        stray += [f"{rel}:{line} (in {fn})" for fn, line in _writers(path) if (rel, fn) not in ALLOWED]
    assert not stray, "termination written outside Trajectory.end:\n  " + "\n  ".join(stray)


def test_the_check_sees_a_planted_writer(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("def ended(traj):\n    traj.termination, traj.termination_reason = 'error', 'x'\n")
    assert _writers(planted) == [("ended", 2)]
