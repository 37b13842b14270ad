"""Names that are formulas or markup, in the CSV and Markdown we write for other programs.

A real sweep whose model and setting names are spreadsheet formulas (``=HYPERLINK(...)``,
``@SUM(...)``, ``+cmd``, ``-2+3``), a ``--published`` file whose paper is a DDE payload and an
``<img onerror>``, and a checkpoint series named like a formula; then the real CLI's
``report --leaderboard --format csv|markdown`` and ``report --series NAME --format csv``.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
import yaml

from fasteval.core.cells import FORMULA_STARTS
from tests.view.sweep_fixture import run_cli

NAMES = ['=HYPERLINK("http://evil.example/","x")', "@SUM(1+1)", "+cmd", "-2+3"]
OURS = re.compile(r"-|-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")
"""A number we formatted (a mean, a std, a count, a step), or our "-" for none."""
pytestmark = pytest.mark.slow  # real sweeps, a series served by the sim


def _write(root: Path, config: dict[str, object]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "sweep.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cells")
    config = {"seeds": 1, "models": [{"name": n, "provider": "sim", "policy": "direct"} for n in NAMES],
              "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [64, 48]},
                          "settings": [{"name": "=1+1", "tools": []}, {"name": "plain", "tools": []}]}],
              "run": {"fsync": "never"}}
    proc = run_cli("run", str(_write(root, config)), "--run-dir", str(root / "run"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    published = root / "published.yaml"
    published.write_text(yaml.safe_dump([{
        "suite": "demo", "setting": "=1+1", "model": "-1+1 <script>", "match": ["-2+3"], "value": 50,
        "paper": '=cmd|"/c calc"!A1 <img src=x onerror=alert(1)>', "table": "@T & <b>bold</b> &lt;"}]))
    return root / "run", published


def _cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def test_no_csv_cell_of_the_leaderboard_starts_a_formula(hostile_run: tuple[Path, Path]) -> None:
    run_dir, published = hostile_run
    proc = run_cli("report", str(run_dir), "--leaderboard", "--format", "csv", "--published", str(published))
    assert proc.returncode == 0, proc.stderr
    cells = _cells(proc.stdout)
    formulas = [c for c in cells if c.startswith(FORMULA_STARTS) and not OURS.fullmatch(c)]
    assert not formulas, formulas
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert sorted(r["model"] for r in rows) == sorted("'" + n for n in NAMES)  # the name, shown as text
    source = next(r for r in rows if r["model"] == "'-2+3")["demo/=1+1 published source"]
    assert source == "'" + '=cmd|"/c calc"!A1 <img src=x onerror=alert(1)>, @T & <b>bold</b> &lt;'


def test_no_markdown_cell_of_the_leaderboard_holds_markup(hostile_run: tuple[Path, Path]) -> None:
    run_dir, published = hostile_run
    proc = run_cli("report", str(run_dir), "--leaderboard", "--format", "markdown", "--published", str(published))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.replace("<br>", "")  # the one tag we write ourselves, between a cell's lines
    assert "<" not in text and ">" not in text, text
    assert "&lt;img src=x onerror=alert(1)&gt;" in proc.stdout
    assert "@T &amp; &lt;b&gt;bold&lt;/b&gt; &amp;lt;" in proc.stdout  # an entity in the text shows as written
    assert "as -1+1 &lt;script&gt;" in proc.stdout


def test_no_csv_cell_of_a_learning_curve_starts_a_formula(tmp_path: Path) -> None:
    for step in (100, 200):
        folder = tmp_path / "ckpts" / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(b"\0" * 16)
    command = ["{python}", "-m", "providers.sim", "--port", "{port}", "--model={served_model_name}:direct"]
    config = {"seeds": 1,
              "models": [{"name": "-2+3", "provider": "vllm",
                          "serve": {"model": str(tmp_path / "ckpts" / "checkpoint-*"), "command": command,
                                    "startup_timeout_s": 60}}],
              "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [64, 48]},
                          "settings": [{"name": "@SUM(1+1)", "tools": []}]}],
              "run": {"gpus": [0], "fsync": "never"}}
    proc = run_cli("run", str(_write(tmp_path, config)), "--run-dir", str(tmp_path / "run"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("report", str(tmp_path / "run"), "--series=-2+3", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    cells = _cells(proc.stdout)
    formulas = [c for c in cells if c.startswith(FORMULA_STARTS) and not OURS.fullmatch(c)]
    assert not formulas, formulas
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [(r["series"], r["setting"], r["step"], r["model"]) for r in rows] == [
        ("'-2+3", "'@SUM(1+1)", "100", "'-2+3@100"), ("'-2+3", "'@SUM(1+1)", "200", "'-2+3@200")]


def test_no_csv_cell_of_the_plain_report_starts_a_formula(hostile_run: tuple[Path, Path]) -> None:
    """``report --format csv`` (not the leaderboard) names models and settings as text too."""
    run_dir, _ = hostile_run
    proc = run_cli("report", str(run_dir), "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    cells = _cells(proc.stdout)
    formulas = [c for c in cells if c.startswith(FORMULA_STARTS) and not OURS.fullmatch(c)]
    assert not formulas, formulas
    assert {"'" + n for n in NAMES} <= set(cells) and "'=1+1" in cells, cells
