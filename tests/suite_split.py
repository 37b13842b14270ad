"""``make test`` and ``make test-slow`` split the suite by the ``slow`` mark; together they must run every test.

``make test-slow`` (and so CI) runs this first with the two targets' own pytest arguments:

    python tests/suite_split.py <make test's arguments> -- <make test-slow's arguments>

It collects the suite twice, once with each half's arguments, and fails naming every test that
neither half selects (or that both do). Each collection also records every test pytest found
before ``-m`` deselected any (this module, loaded with ``-p``, sees the items first), so the whole
suite costs no third collection. ``tests/architecture/test_suite_split.py`` proves it fails on a
planted gap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

_OUT = "FASTEVAL_SUITE_SPLIT_OUT"
_found: list[str] = []


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _found.extend(item.nodeid for item in items)


def pytest_collection_finish(session: pytest.Session) -> None:
    out = os.environ.get(_OUT)
    if out:
        Path(out).write_text(json.dumps({"all": _found, "selected": [i.nodeid for i in session.items]}))


def collect(args: list[str], cwd: Path) -> dict[str, list[str]]:
    """Every test pytest finds with ``args``, and those it selects."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "collected.json"
        root = str(Path(__file__).resolve().parents[1])  # where `tests.suite_split` is found, whatever cwd is
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        proc = subprocess.run([sys.executable, "-m", "pytest", *args, "--collect-only", "-q", "-p", "no:cacheprovider",
                               "-p", "tests.suite_split"], cwd=cwd, env={**os.environ, _OUT: str(out), "PYTHONPATH": path},
                              capture_output=True, text=True, timeout=600)
        if not out.exists():
            raise SystemExit(f"collecting with {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}"
                             f"{proc.stderr[-2000:]}")
        found: dict[str, list[str]] = json.loads(out.read_text())
        return found


def check(fast_args: list[str], slow_args: list[str], cwd: Path) -> list[str]:
    """One line per test that the two halves do not run exactly once between them; empty when they do."""
    fast, slow = collect(fast_args, cwd), collect(slow_args, cwd)
    every = set(fast["all"]) | set(slow["all"])
    a, b = set(fast["selected"]), set(slow["selected"])
    problems = [f"in neither `make test` nor `make test-slow`: {t}" for t in sorted(every - a - b)]
    problems += [f"in both `make test` and `make test-slow`: {t}" for t in sorted(a & b)]
    if not problems:
        print(f"suite split: {len(every)} tests, {len(a)} in `make test`, {len(b)} in `make test-slow`")
    return problems


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("usage: suite_split.py FAST_ARGS... -- SLOW_ARGS...", file=sys.stderr)
        return 2
    cut = argv.index("--")
    problems = check(argv[:cut], argv[cut + 1:], Path.cwd())
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
