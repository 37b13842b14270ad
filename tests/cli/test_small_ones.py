"""#39 item 15, the small ones a new user tripped on, each as the command line shows it."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import orjson
import pytest
import yaml

from fasteval.cli.main import main
from fasteval.core.errors import ConfigError
from fasteval.view.data import RunSet


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def two_suites(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two suites that both call a setting ``plain``, three seeds, two models."""
    tmp = tmp_path_factory.mktemp("small")
    cfg = tmp / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({
        "seeds": 3,
        "models": [{"name": "sim-direct", "provider": "sim", "policy": "direct"},
                   {"name": "sim-tools", "provider": "sim", "policy": "tools"}],
        "suites": [{"name": "demo", "options": {"n_tasks": 3, "image_size": [48, 32]},
                    "settings": [{"name": "plain", "tools": ["image_zoom_in_tool", "calculator"]}]},
                   {"name": "tir-synth", "options": {"seed": 0, "n_per_type": 2, "types": ["proportion"]},
                    "settings": [{"name": "plain", "tools": []}]}],
        "run": {"fsync": "never"}}))
    assert main(["run", str(cfg), "--run-dir", str(tmp / "run"), "--no-progress"]) == 0
    return cfg, tmp / "run"


def test_the_dry_run_plan_has_a_row_per_group_with_its_seeds(two_suites: tuple[Path, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    cfg, run = two_suites
    code, out, _ = cli(capsys, "run", str(cfg), "--run-dir", str(run.parent / "fresh"), "--dry-run")
    plan = out.split("per model and suite")[0]  # the plan's table, before the growth table
    rows = [line for line in plan.splitlines() if "sim-" in line]
    assert code == 0 and len(rows) == 4, plan  # 2 models × 2 suites, not × 3 seeds
    assert all("0-2" in r for r in rows) and any(" 9 " in r for r in rows) and any(" 6 " in r for r in rows), plan


def test_status_keeps_same_named_settings_of_two_suites_apart(two_suites: tuple[Path, Path],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    _, run = two_suites
    code, out, _ = cli(capsys, "status", str(run), "--format", "json")
    by_setting = orjson.loads(out)["by_setting"]
    assert code == 0 and set(by_setting) == {"demo/plain", "tir-synth/plain"}, by_setting
    assert by_setting["demo/plain"]["total"] == 18 and by_setting["tir-synth/plain"]["total"] == 12


def test_plain_report_as_csv_and_markdown(two_suites: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, run = two_suites
    code, out, _ = cli(capsys, "report", str(run), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) == 4
    assert {(r["model"], r["suite"], r["model jobs done"], r["model jobs planned"]) for r in rows} >= {
        ("sim-tools", "demo", "15", "15")}
    assert all(r["mean"] != "" and r["ci_low"] != "-" for r in rows)
    code, out, _ = cli(capsys, "report", str(run), "--format", "markdown")
    assert code == 0 and out.startswith("| model | suite | setting | mean |") and out.count("| sim-") == 4, out
    code, out, _ = cli(capsys, "report", str(run), "--leaderboard", "--format", "csv")
    board = list(csv.DictReader(io.StringIO(out)))
    assert board[0]["demo fixed"] == "" and board[0]["demo reference"] == "", board  # was "-": text to a sheet


def test_html_examples_are_different_tasks(two_suites: tuple[Path, Path]) -> None:
    _, run = two_suites
    runs = RunSet([run])
    for model in ("sim-direct", "sim-tools"):
        picked = [(j["record"]["suite"], j["record"]["task_id"]) for j in runs.example_jobs(run.name, 3)
                  if j["record"]["model"] == model]
        assert len(picked) == 3 and len(set(picked)) == 3, picked  # was one task's seeds, one after another


def test_config_errors_come_in_file_order(tmp_path: Path) -> None:
    from fasteval.config.load import load_config

    cfg = tmp_path / "bad.yaml"
    cfg.write_text("seeds: 1\nmodels:\n  - name: a\n    provider: sim\n    polcy: direct\n"
                   "suites:\n  - name: demo\n    optoins: {}\nrun:\n  max_concurency: 2\n")
    with pytest.raises(ConfigError) as e:
        load_config(cfg)
    lines = [int(p.split(":")[1]) for p in e.value.problems]
    assert lines == sorted(lines) and len(lines) == 3, e.value.problems


def test_run_help_explains_every_argument_and_list_policies_whole_sentences(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = capsys.readouterr().out.split("positional arguments:", 1)[1]  # the listing, not the usage line
    for flag, words in (("config", "the sweep config"), ("--run-dir RUN_DIR", "where records go"),
                        ("--max-concurrency N", "jobs in flight")):
        assert words in text.split(flag, 1)[1][:120], (flag, text)
    code, out, _ = cli(capsys, "list", "policies")
    line = next(x for x in out.splitlines() if x.startswith("sequence"))
    assert line.rstrip().endswith("`default_reply`."), line  # was cut at the docstring's first line


def test_data_fetch_help_lists_every_name_it_takes(capsys: pytest.CaptureFixture[str]) -> None:
    from fasteval.suites.data_fetch import DATASETS, REFERENCE_REPOS

    with pytest.raises(SystemExit):
        main(["data", "fetch", "--help"])
    listing = capsys.readouterr().out.split("benchmarks (default --dest", 1)[1]
    names = {line.split()[0] for line in listing.splitlines() if line.startswith("  ")}
    assert names == set(DATASETS) | set(REFERENCE_REPOS), listing


def test_cli_md_names_every_benchmark_and_harness_data_fetch_takes() -> None:
    """#39 item 16: cli.md's data fetch named 3 of its benchmarks."""
    from fasteval.suites.data_fetch import DATASETS, REFERENCE_REPOS

    rows = [line for line in (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text().splitlines()
            if line.startswith("| `fasteval data fetch ")]
    named = set(re.findall(r"[a-z0-9-]+", " ".join(rows)))
    missing = [n for n in [*DATASETS, *REFERENCE_REPOS] if n not in named]
    assert not missing, missing


def test_sim_md_names_every_policy_the_sim_has() -> None:
    """#39 item 16: docs/sim.md lacked the `oracle` and `guess` policies."""
    from providers import POLICIES

    doc = (Path(__file__).resolve().parents[2] / "docs" / "sim.md").read_text()
    assert not [name for name in POLICIES if f"`{name}`" not in doc], sorted(POLICIES)
