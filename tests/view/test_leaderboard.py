"""``fasteval report RUN --leaderboard``: a row per model, a column per suite × setting, papers beside ours."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from fasteval.suites.published import shipped_scores
from fasteval.view.html_report import render_report
from fasteval.view.leaderboard import leaderboard, markdown
from fasteval.view.report import report
from tests.view.sweep_fixture import run_cli


def _board(run_dir: Path, *extra: str) -> dict[str, Any]:
    proc = run_cli("report", str(run_dir), "--leaderboard", "--format", "json", *extra)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def test_leaderboard_rows_columns_and_the_configs_published_number(series_run: Path) -> None:
    board = _board(series_run)
    assert [c["key"] for c in board["columns"]] == ["demo/no-tools", "demo/tools"]
    models = [r["model"] for r in board["rows"]]
    assert models == ["ck@200", "ck@300", "ck@100"]  # best average first, ties by name
    rows = {r["model"]: r for r in board["rows"]}
    rep = {(r["model"], r["setting"]): r for r in report(series_run)["rows"]}
    for model, row in rows.items():
        for setting in ("tools", "no-tools"):
            cell = row["cells"][f"demo/{setting}"]
            assert cell["mean"] == rep[model, setting]["mean"] and cell["std"] == rep[model, setting]["std"]
        assert row["average"] == (row["cells"]["demo/tools"]["mean"] + row["cells"]["demo/no-tools"]["mean"]) / 2
        assert row["complete"]
    [pub] = rows["ck@300"]["cells"]["demo/tools"]["published"]
    assert pub == {"model": "CK-300 [bold]x[/]", "value": 0.875, "paper": "Our report: <b>v2</b>", "table": "Table 1",
                   "metric": None, "note": "greedy", "origin": "config"}
    assert rows["ck@200"]["cells"]["demo/tools"]["published"] == []
    assert rows["ck@300"]["cells"]["demo/no-tools"]["published"] == []


@pytest.mark.slow
def test_leaderboard_sorts_by_model_or_a_column_and_refuses_an_unknown_key(series_run: Path) -> None:
    assert [r["model"] for r in _board(series_run, "--sort", "model")["rows"]] == ["ck@100", "ck@200", "ck@300"]
    by_tool = _board(series_run, "--sort", "demo/tools")["rows"]
    assert by_tool[-1]["model"] == "ck@100"
    proc = run_cli("report", str(series_run), "--leaderboard", "--sort", "accuracy")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "accuracy" in proc.stderr and "demo/tools" in proc.stderr


@pytest.mark.slow
def test_leaderboard_csv_markdown_and_table(series_run: Path) -> None:
    proc = run_cli("report", str(series_run), "--leaderboard", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    lines = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [r["model"] for r in lines][-1] == "ck@100"
    ck300 = next(r for r in lines if r["model"] == "ck@300")
    assert ck300["demo/tools published"] == "87.5"
    assert ck300["demo/tools published source"] == "Our report: <b>v2</b>, Table 1"
    md = run_cli("report", str(series_run), "--leaderboard", "--format", "markdown")
    assert md.returncode == 0 and md.stdout.startswith("| model | demo/no-tools | demo/tools | average |")
    assert "paper 87.5 (Our report Table 1, as CK-300 [bold]x[/])" in md.stdout
    table = run_cli("report", str(series_run), "--leaderboard")
    assert table.returncode == 0 and "[bold]x[/]" in table.stdout  # printed literally, not as Rich markup
    rows = run_cli("report", str(series_run), "--format", "csv")  # without --leaderboard: a line per group
    assert rows.returncode == 0 and rows.stdout.splitlines()[0].startswith("model,suite,setting,mean,")


def test_html_report_opens_with_the_leaderboard_escaped(series_run: Path) -> None:
    page = render_report(series_run)
    assert page.index("<h2>Leaderboard</h2>") < page.index("<h2>Score (%) mean ± std over seeds</h2>")
    assert "Our report: &lt;b&gt;v2&lt;/b&gt;" in page and "<b>v2</b>" not in page


def _row(model: str, suite: str, setting: str, mean: float, **metrics: float) -> dict[str, Any]:
    return {"model": model, "suite": suite, "setting": setting, "mean": mean, "std": 0.01, "n_seeds": 5,
            "n_error": 0, **({"suite_metrics": metrics} if metrics else {})}


def test_shipped_numbers_match_by_endpoint_model_id_and_both_scorers_show() -> None:
    rep = {"rows": [_row("nightly", "vistahop", "search_crop", 0.25),
                    _row("nightly", "vstar", "direct", 0.8, reference=0.78, reference_std=0.02, fixed=0.8,
                         fixed_std=0.01),
                    _row("other", "vistahop", "search_crop", 0.1)]}
    config = {"models": [{"name": "nightly", "provider": "openai", "model": "GPT-5.2"},
                         {"name": "other", "provider": "openai", "model": "gpt-4o"}]}
    board = leaderboard(rep, config)
    nightly, other = board["rows"]
    cell = nightly["cells"]["vistahop/search_crop"]
    [pub] = cell["published"]
    assert pub["value"] == 0.2583 and pub["table"] == "Table 3" and pub["paper"].startswith("VistaHop")
    assert pub["origin"] == "shipped"
    both = nightly["cells"]["vstar/direct"]
    assert (both["fixed"], both["reference"], both["reference_std"]) == (0.8, 0.78, 0.02)
    assert "fixed" not in cell
    assert other["cells"]["vistahop/search_crop"]["published"] == []
    assert not other["complete"] and other["n_columns"] == 1 and other["average"] == 0.1
    text = markdown(board)
    assert "fixed 80.0 ± 1.0, ref 78.0 ± 2.0" in text and "| other | 10.0 ± 1.0 | - | 10.0 (1/2) |" in text
    assert "paper 25.83 (VistaHop Table 3, as GPT-5.2)" in text


def test_hrbench_numbers_sit_only_beside_a_run_of_their_version() -> None:
    """4K and 8K share setting names: an 8K run called ``direct`` gets no 4K paper number."""
    rep = {"rows": [_row("gpt-4o", "hrbench", "direct", 0.6), _row("gpt-4o", "hrbench", "direct-8k", 0.5)]}
    models = [{"name": "gpt-4o", "provider": "openai"}]

    def published(suites: list[dict[str, Any]], key: str) -> list[tuple[str, float]]:
        [row] = leaderboard(rep, {"models": models, "suites": suites})["rows"]
        return sorted((p["metric"], p["value"]) for p in row["cells"][key]["published"])

    default_4k = [{"name": "hrbench", "options": {"path": "x"}, "settings": [{"name": "direct"}]},
                  {"name": "hrbench", "options": {"path": "x", "version": "8k"}, "settings": [{"name": "direct-8k"}]}]
    assert published(default_4k, "hrbench/direct") == [("HR-Bench 4K Acc.", 0.59), ("HR-Bench 4K accuracy", 0.62)]
    assert published(default_4k, "hrbench/direct-8k") == [("HR-Bench 8K Acc.", 0.555), ("HR-Bench 8K accuracy", 0.583)]
    eight_k_as_direct = [{"name": "hrbench", "options": {"path": "x", "version": "8k"}, "settings": [{"name": "direct"}]}]
    assert published(eight_k_as_direct, "hrbench/direct") == []


def test_a_configs_number_comes_before_the_shipped_one() -> None:
    rep = {"rows": [_row("o3", "tirbench", "tool", 0.4)]}
    config = {"models": [{"name": "o3", "provider": "openai", "model": "o3-2025-04-16"}],
              "published": [{"suite": "tirbench", "setting": "tool", "model": "o3 (rerun)", "match": ["o3"],
                             "value": 44.0, "paper": "internal", "table": "sheet 2"}]}
    [row] = leaderboard(rep, config)["rows"]
    assert [(p["origin"], p["value"]) for p in row["cells"]["tirbench/tool"]["published"]] == [
        ("config", 0.44), ("shipped", 0.46)]


def test_every_shipped_number_names_its_paper_and_table() -> None:
    scores = shipped_scores()
    assert len(scores) >= 20
    for s in scores:
        assert s.paper and s.table.startswith(("Table", "README")) and s.match and 0 < s.value < 100
    keys = [(s.suite, s.setting, s.model, s.paper) for s in scores]
    assert len(keys) == len(set(keys))


def test_numbers_from_a_file_join_a_finished_run_without_touching_its_config(series_run: Path, tmp_path: Path) -> None:
    extra = tmp_path / "more.yaml"
    extra.write_text("- {suite: demo, setting: no-tools, model: CK-100, match: [ck@100], value: 12.5,\n"
                     "   paper: Workshop note, table: Table 4}\n")
    board = _board(series_run, "--published", str(extra))
    row = next(r for r in board["rows"] if r["model"] == "ck@100")
    assert [(p["origin"], p["value"], p["table"]) for p in row["cells"]["demo/no-tools"]["published"]] == [
        ("file", 0.125, "Table 4")]
    extra.write_text("- {suite: demo, setting: no-tools, model: CK-100, match: [ck@100], value: 12.5}\n")
    proc = run_cli("report", str(series_run), "--leaderboard", "--published", str(extra))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "missing paper, table" in proc.stderr
