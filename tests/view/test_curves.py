"""Learning curves of a series: terminal report, ``--series NAME --format json|csv`` and the HTML report.

One real sweep: a series of three checkpoints served by the sim (``serve.command``), each step's
server answering with the policy its checkpoint folder names (a trainer whose middle step learned
to use the tool), two seeds, the tir-synth suite in the sandbox.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml

from fasteval.view.curves import learning_curves
from tests.view.sweep_fixture import run_cli

pytestmark = pytest.mark.slow

POLICIES = {100: "guess", 200: "oracle", 300: "guess"}


@pytest.fixture(scope="module")
def series_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("curves")
    for step, policy in POLICIES.items():
        folder = root / "ckpts" / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(b"\0" * 16)
        (folder / "policy").write_text(policy)
    command = ["sh", "-c", "exec {python} -m providers.sim --port {port} --model {served_model_name}:$(cat {model}/policy)"]
    config = {"seeds": 2,
              "models": [{"name": "run7", "provider": "vllm",
                          "serve": {"model": "ckpts/checkpoint-*", "command": command, "startup_timeout_s": 60}},
                         {"name": "api", "provider": "sim", "policy": "oracle"}],  # not a series: no curve
              "suites": [{"name": "tir-synth", "options": {"seed": 0, "n_per_type": 1}, "settings": [{"name": "tool"}]}],
              "run": {"gpus": [0], "fsync": "never", "sandbox": {"workers": 2}}}
    (root / "sweep.yaml").write_text(yaml.safe_dump(config))
    proc = run_cli("run", str(root / "sweep.yaml"), "--run-dir", str(root / "run"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    return root / "run"


def test_the_curve_follows_the_steps_with_the_best_step_and_tool_use(series_run: Path) -> None:
    proc = run_cli("report", str(series_run), "--series", "run7", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["series"] == "run7" and len(doc["curves"]) == 1
    curve = doc["curves"][0]
    assert (curve["suite"], curve["setting"]) == ("tir-synth", "tool")
    points = curve["points"]
    assert [p["step"] for p in points] == [100, 200, 300]
    assert curve["best"] == {"step": 200, "mean": 1.0}
    assert points[1]["mean"] > points[0]["mean"] and points[1]["mean"] > points[2]["mean"]
    assert points[1]["tool_calls_per_trajectory"] > 0 == points[0]["tool_calls_per_trajectory"]
    for p in points:  # the band is the spread of the two seeds' means around the mean
        assert p["n_seeds"] == 2 and p["band"][0] <= p["mean"] <= p["band"][1]


def test_csv_has_one_line_per_step_and_marks_the_best(series_run: Path) -> None:
    proc = run_cli("report", str(series_run), "--series", "run7", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [(r["step"], r["model"], r["best"]) for r in rows] == [
        ("100", "run7@100", "0"), ("200", "run7@200", "1"), ("300", "run7@300", "0")]
    assert float(rows[1]["mean"]) == 1.0 and float(rows[1]["tool_calls_per_trajectory"]) > 0


def test_terminal_and_html_reports_show_the_curve_and_an_unknown_series_is_refused(series_run: Path,
                                                                                   tmp_path: Path) -> None:
    proc = run_cli("report", str(series_run))
    assert proc.returncode == 0, proc.stderr
    assert "learning curve of run7: tir-synth / tool (best step 200)" in proc.stdout
    assert "learning curve of api" not in proc.stdout
    out = tmp_path / "report.html"
    assert run_cli("report", str(series_run), "--html", str(out)).returncode == 0
    html = out.read_text()
    assert "<h2>Learning curves</h2>" in html and 'data-series="run7"' in html
    assert 'class="band"' in html and "step 200: 100 (band 100–100) · best" in html
    bad = run_cli("report", str(series_run), "--series", "run8")
    assert bad.returncode == 2 and "no series 'run8'" in bad.stderr and "run7" in bad.stderr
    plain = run_cli("report", str(series_run), "--format", "csv")  # without --series: the report's rows
    assert plain.returncode == 0 and plain.stdout.startswith("model,suite,setting,mean,")
    assert run_cli("report", str(series_run), "--series", "run7", "--format", "markdown").returncode == 2


def test_rows_outside_a_series_and_ties_between_steps() -> None:
    config = {"models": [{"name": "r", "provider": "vllm", "serve": {"model": "/c/step_*"}},
                         {"name": "x@5", "provider": "sim"}]}
    row = {"suite": "s", "setting": "t", "std": 0.0, "n_seeds": 1, "n_ok": 1, "n_error": 0,
           "tool_calls_per_trajectory": 0.0}
    rows = [{**row, "model": "r@20", "mean": 0.5, "seed_means": [0.5]},
            {**row, "model": "r@10", "mean": 0.5, "seed_means": [0.5]},
            {**row, "model": "x@5", "mean": 0.9, "seed_means": [0.9]}]
    curves = learning_curves(rows, config)
    assert list(curves) == ["r"]
    assert curves["r"]["curves"][0]["best"] == {"step": 10, "mean": 0.5}  # a tie goes to the earlier step
