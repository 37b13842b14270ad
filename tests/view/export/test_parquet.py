"""``fasteval export --format parquet``, read back by pandas and DuckDB: the report's numbers, typed.

The jobs table must let an analyst recompute the report (mean over seeds of the per-seed means,
the between-seed std, tokens, cost) in SQL, and the rounds table must hold one row per model request.
"""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import orjson
import pandas as pd
import pyarrow.parquet as pq
import pytest

from fasteval.view.export import ExportError, Selection, export_run
from fasteval.view.report import report
from tests.view.export.support import latest_records
from tests.view.sweep_fixture import run_cli

pytestmark = pytest.mark.slow  # one real sweep per module or session, then the library's reader


@pytest.fixture(scope="module")
def tables(run_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("parquet") / "jobs.parquet"
    proc = run_cli("export", str(run_folder), "--format", "parquet", "--rounds", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = orjson.loads(proc.stdout)
    assert done["out"] == [str(out), str(out.with_name("jobs.rounds.parquet"))] and done["partial"] is False
    return out, out.with_name("jobs.rounds.parquet")


def test_duckdb_recomputes_the_reports_headline_tokens_and_cost(run_folder: Path, tables: tuple[Path, Path]) -> None:
    jobs, _ = tables
    rep = {(r["model"], r["suite"], r["setting"]): r for r in report(run_folder)["rows"]}
    got = duckdb.sql(f"""
        WITH seeds AS (
            SELECT model, suite, setting, seed, avg(score) AS m FROM '{jobs}' WHERE status = 'ok' GROUP BY ALL)
        SELECT s.model, s.suite, s.setting, avg(m) AS mean, coalesce(stddev_samp(m), 0) AS std, count(*) AS n_seeds,
               (SELECT count(*) FILTER (status = 'ok') FROM '{jobs}' j WHERE (j.model, j.suite, j.setting)
                    = (s.model, s.suite, s.setting)) AS n_ok,
               (SELECT count(*) FILTER (status = 'error') FROM '{jobs}' j WHERE (j.model, j.suite, j.setting)
                    = (s.model, s.suite, s.setting)) AS n_error,
               (SELECT sum(prompt_tokens) FROM '{jobs}' j WHERE (j.model, j.suite, j.setting)
                    = (s.model, s.suite, s.setting)) AS prompt_tokens,
               (SELECT sum(cost_usd) FROM '{jobs}' j WHERE (j.model, j.suite, j.setting)
                    = (s.model, s.suite, s.setting)) AS cost
        FROM seeds s GROUP BY s.model, s.suite, s.setting""").fetchall()
    assert {(m, s, st) for m, s, st, *_ in got} == set(rep)
    for model, suite, setting, mean, std, n_seeds, n_ok, n_error, prompt, cost in got:
        row = rep[model, suite, setting]
        assert mean == pytest.approx(row["mean"], abs=1e-12) and std == pytest.approx(row["std"], abs=1e-12)
        assert (n_seeds, n_ok, n_error) == (row["n_seeds"], row["n_ok"], row["n_error"])
        assert prompt == row["tokens"]["prompt_tokens"]
        if row["cost_usd"] is None:
            assert cost is None
        else:
            assert cost == pytest.approx(row["cost_usd"], rel=1e-6) and cost > 0
    assert any(m == "sim-flaky" and n_error for m, *_, n_error, _, _ in got)  # the errors are in the table


def test_pandas_reads_typed_columns_and_every_job_once(run_folder: Path, tables: tuple[Path, Path]) -> None:
    jobs, _ = tables
    df = pd.read_parquet(jobs)
    recs = {r["job_id"]: r for r in latest_records(run_folder)}
    assert len(df) == len(recs) and set(df["job_id"]) == set(recs)
    types = dict(zip(df.columns, df.dtypes.astype(str), strict=True))
    assert types["seed"] == types["rounds"] == types["prompt_tokens"] == types["image_tokens"] == "int64"
    assert types["score"] == types["cost_usd"] == types["latency_s"] == "float64"
    schema = pq.read_schema(jobs)
    assert str(schema.field("model").type) == "string" and str(schema.field("score_fixed").type) == "double"
    meta = orjson.loads(schema.metadata[b"fasteval"])
    assert meta["config_hash"] and meta["partial"] is False and meta["table"] == "jobs"
    for row in df.itertuples():
        rec = recs[row.job_id]
        assert (row.model, row.suite, row.setting, row.seed, row.task_id, row.status) == (
            rec["model"], rec["suite"], rec["setting"], rec["seed"], rec["task_id"], rec["status"])
        assert (row.rounds, row.tool_calls, row.completion_tokens) == (
            rec["rounds"], rec["tool_calls"], rec["usage"]["completion_tokens"])
        if rec["status"] == "ok":
            assert row.score == rec["score"] and pd.isna(row.error_kind)
        else:
            assert math.isnan(row.score) and row.error_kind == rec["error_kind"] and row.error == rec["error"]
        both = rec["score_details"].get("scores")
        if both:  # V*: the reference scorer's and ours side by side
            assert (row.score_reference, row.score_fixed) == (both["reference"], both["fixed"])
        else:
            assert math.isnan(row.score_reference) and math.isnan(row.score_fixed)
    assert df.loc[df.suite == "vstar", "score_reference"].notna().all()


def test_rounds_table_has_a_row_per_request_with_its_turn_and_calls(run_folder: Path,
                                                                     tables: tuple[Path, Path]) -> None:
    _, rounds = tables
    df = pd.read_parquet(rounds)
    recs = {r["job_id"]: r for r in latest_records(run_folder)}
    assert len(df) == sum(len(r.get("trajectory", {}).get("prompt_tokens_by_round") or []) for r in recs.values())
    per_job = df.groupby("job_id").agg(prompt=("prompt_tokens", "sum"), completion=("completion_tokens", "sum"),
                                       calls=("tool_calls", "sum"), n=("round", "max"))
    for job_id, row in per_job.iterrows():
        rec = recs[job_id]
        assert (row.prompt, row.completion) == (rec["usage"]["prompt_tokens"], rec["usage"]["completion_tokens"])
        assert row.calls == rec["tool_calls"] and row.n == rec["rounds"]
    two_turns = df[df.suite == "demo"].groupby("job_id")["turn"].max()
    assert (two_turns == 1).any()  # the demo suite's second user turn
    text_protocol = df[(df.setting == "deepeyes") & (df.tool_calls > 0)]
    assert len(text_protocol) and set(text_protocol.tool_names.map(tuple)) == {("image_zoom_in_tool",)}
    [(by_duck,)] = duckdb.sql(f"SELECT count(*) FROM '{rounds}' WHERE round_in_turn = 1").fetchall()
    assert by_duck == sum(len(set(r.get("trajectory", {}).get("turn_by_round") or []))
                                                     for r in recs.values())


def test_a_selection_exports_only_its_jobs_and_an_existing_out_needs_force(run_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "one.parquet"
    done = export_run_once(run_folder, out, ("sim-tools",), ("vstar",))
    df = pd.read_parquet(out)
    assert done["jobs"] == len(df) > 0 and set(df.model) == {"sim-tools"} and set(df.suite) == {"vstar"}
    with pytest.raises(ExportError, match="exists: pass --force"):
        export_run_once(run_folder, out, (), ())
    assert len(pd.read_parquet(out)) == len(df)  # the refused export left the first one alone
    assert not list(tmp_path.glob(".*export*"))


def export_run_once(run_dir: Path, out: Path, models: tuple[str, ...], suites: tuple[str, ...]) -> dict[str, object]:
    return export_run(run_dir, "parquet", out, Selection(models, suites))
