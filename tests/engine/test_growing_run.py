"""A run folder that grows and a store that never pays twice, proven by what the model servers saw.

Each model is its own sim server on loopback (the OpenAI wire), so a server's request count says
exactly which model's jobs a run sent: adding a model sends only its requests, changing one
model's temperature only that model's, changing concurrency or an endpoint's URL none, and a
second run folder over the same config against the store none at all.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.engine.forecast.dry_run import preview
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep
from fasteval.runfolder.index import open_index
from fasteval.store.manage import listing
from fasteval.view.export import export_run
from fasteval.view.leaderboard import leaderboard
from fasteval.view.report import report, status
from fasteval.view.store_report import store_report
from providers.sim import SimModel, SimServer
from tests.runfolder.index_support import index_aggregates, rescan_aggregates

pytestmark = pytest.mark.slow  # every test here runs real sweeps against real servers, several times

N_TASKS, SEEDS = 3, 2
JOBS = N_TASKS * SEEDS  # per model


@pytest.fixture
async def servers() -> AsyncIterator[dict[str, SimServer]]:
    """Model ``a`` answers right (tools) at ``a``, wrong (direct) at ``a-wrong``; ``b`` and ``c``."""
    out = {"a": SimServer([SimModel("a", policy="direct")]), "a-right": SimServer([SimModel("a", policy="tools")]),
           "b": SimServer([SimModel("b", policy="tools")]), "b-again": SimServer([SimModel("b", policy="tools")]),
           "c": SimServer([SimModel("c", policy="tools")])}
    for s in out.values():
        await s.start()
    try:
        yield out
    finally:
        for s in out.values():
            await s.stop()


def model(name: str, server: SimServer, **extra: Any) -> dict[str, Any]:
    return {"name": name, "provider": "openai", "base_url": server.base_url, "model": name,
            "retry": {"max_attempts": 2}, **extra}


def config(tmp: Path, models: list[dict[str, Any]], *, name: str = "sweep", **top: Any) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "seeds": SEEDS, "models": models,
        "suites": [{"name": "demo", "options": {"n_tasks": N_TASKS, "image_size": [320, 240]},
                    "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}],
        "run": {"max_concurrency": 8}, **top}))
    return path


def counts(servers: dict[str, SimServer]) -> dict[str, int]:
    return {k: s.requests for k, s in servers.items()}


def sent(before: dict[str, int], servers: dict[str, SimServer]) -> dict[str, int]:
    """Requests each server got since ``before`` (servers that got none left out)."""
    return {k: n - before[k] for k, n in counts(servers).items() if n != before[k]}


async def run(path: Path, run_dir: Path) -> Any:
    return await run_sweep(load_config(path), RunOptions(run_dir=run_dir, progress=False))


async def test_adding_a_model_runs_only_its_jobs_and_operational_changes_run_nothing(
        tmp_path: Path, servers: dict[str, SimServer]) -> None:
    run_dir = tmp_path / "run"
    first = await run(config(tmp_path, [model("a", servers["a-right"])]), run_dir)
    assert first.ok == JOBS
    before = counts(servers)
    grown = config(tmp_path, [model("a", servers["a-right"]), model("b", servers["b"])])
    pv = preview(load_config(grown), RunOptions(run_dir=run_dir))
    assert pv.by_model_suite == {("a", "demo"): {"reused": JOBS, "store": 0, "new": 0, "changed": 0},
                                 ("b", "demo"): {"reused": 0, "store": 0, "new": JOBS, "changed": 0}}
    res = await run(grown, run_dir)  # no flag
    assert (res.ok, res.skipped) == (JOBS, JOBS)
    assert set(sent(before, servers)) == {"b"}, "only the added model's server was asked"
    assert status(run_dir)["done"] == 2 * JOBS
    # concurrency, limits, retries, b's endpoint URL (the same model elsewhere) and notify shape no result
    before = counts(servers)
    ops = config(tmp_path, [model("a", servers["a-right"], limits={"concurrency": 2}),
                            model("b", servers["b-again"], retry={"max_attempts": 5})], run={"max_concurrency": 3},
                 notify={"command": [sys.executable, "-c", "pass"], "timeout_s": 5})
    again = await run(ops, run_dir)
    assert (again.ok, again.skipped) == (0, 2 * JOBS)
    assert sent(before, servers) == {}


async def test_changing_one_models_temperature_reruns_only_its_jobs_and_the_report_shows_only_the_new(
        tmp_path: Path, servers: dict[str, SimServer]) -> None:
    run_dir = tmp_path / "run"
    # a answers wrong at first; its edited entry (temperature) is served by a server that answers right
    await run(config(tmp_path, [model("a", servers["a"], params={"temperature": 0.2}), model("b", servers["b"])]),
              run_dir)
    old_rows = {(r["model"]): r["mean"] for r in report(run_dir)["rows"]}
    assert old_rows == {"a": 0.0, "b": 1.0}
    edited = config(tmp_path, [model("a", servers["a-right"], params={"temperature": 0.9}), model("b", servers["b"])])
    pv = preview(load_config(edited), RunOptions(run_dir=run_dir))
    assert pv.by_model_suite[("a", "demo")] == {"reused": 0, "store": 0, "new": 0, "changed": JOBS}
    assert pv.by_model_suite[("b", "demo")]["reused"] == JOBS
    change = pv.changes[("a", "demo", "tools")]
    assert change.state == "changed" and change.fields == ["model params.temperature: 0.2 -> 0.9"]
    before = counts(servers)
    res = await run(edited, run_dir)
    assert (res.ok, res.skipped) == (JOBS, JOBS)
    assert set(sent(before, servers)) == {"a-right"}, "only the edited model's jobs were sent"
    rows = report(run_dir)["rows"]
    assert {r["model"]: (r["mean"], r["n_ok"]) for r in rows} == {"a": (1.0, JOBS), "b": (1.0, JOBS)}
    st = status(run_dir)
    assert (st["done"], st["error"], st["total"]) == (2 * JOBS, 0, 2 * JOBS)
    board = leaderboard(report(run_dir), {})
    assert {r["model"]: r["cells"]["demo/tools"]["mean"] for r in board["rows"]} == {"a": 1.0, "b": 1.0}
    # the old records are kept aside, never rewritten, still readable by their job id
    lines = (run_dir / "records.jsonl").read_bytes().splitlines()
    assert len(lines) == 3 * JOBS
    old_lines = [ln for ln in lines[:2 * JOBS] if orjson.loads(ln)["model"] == "a"]
    old = [orjson.loads(ln) for ln in old_lines]
    with open_index(run_dir) as index:
        assert index.stats()["superseded"] == JOBS
        row = index.row(old[0]["job_id"])
        assert row is not None and row.superseded and row.score == 0.0
        assert index.count(model="a") == JOBS and index.count(model="a", superseded=None) == 2 * JOBS
        # the aggregates every reader takes equal a full read of the current records (a's old ones left out)
        current = tmp_path / "current"
        current.mkdir()
        (current / "records.jsonl").write_bytes(b"".join(ln + b"\n" for ln in lines if ln not in old_lines))
        assert index_aggregates(index) == rescan_aggregates(current)
    # an export holds the current records only, as the report does
    export_run(run_dir, "parquet", tmp_path / "x.parquet")
    table = pq.read_table(tmp_path / "x.parquet", columns=["model", "score"]).to_pylist()
    assert len(table) == 2 * JOBS and {r["score"] for r in table if r["model"] == "a"} == {1.0}
    # back to the first temperature: its records are current again, nothing runs
    back = config(tmp_path, [model("a", servers["a"], params={"temperature": 0.2}), model("b", servers["b"])])
    before = counts(servers)
    assert (await run(back, run_dir)).ok == 0 and sent(before, servers) == {}
    assert {r["model"]: r["mean"] for r in report(run_dir)["rows"]} == {"a": 0.0, "b": 1.0}


async def test_a_second_run_folder_against_the_store_sends_nothing_and_reports_the_same(
        tmp_path: Path, servers: dict[str, SimServer]) -> None:
    store = tmp_path / "store"
    path = config(tmp_path, [model("a", servers["a"]), model("b", servers["b"])], store=str(store))
    first = await run(path, tmp_path / "r1")
    assert first.ok == 2 * JOBS and first.stored == 2 * JOBS
    lines_before = sum(1 for _ in listing(store))
    before = counts(servers)
    second = await run(path, tmp_path / "r2")
    assert sent(before, servers) == {}, "no model was asked"
    assert (second.ok, second.reused, second.skipped) == (0, 2 * JOBS, 2 * JOBS)
    assert sum(1 for _ in listing(store)) == lines_before and second.stored == 0, "reuse writes no second copy"
    keep = ("model", "suite", "setting", "mean", "std", "n_ok", "n_error", "n_seeds", "seed_means", "pass_at_k")
    assert [{k: r[k] for k in keep} for r in report(tmp_path / "r1")["rows"]] == \
        [{k: r[k] for k in keep} for r in report(tmp_path / "r2")["rows"]]
    recs = [orjson.loads(ln) for ln in (tmp_path / "r2" / "records.jsonl").read_bytes().splitlines()]
    assert {r["reused"]["run"] for r in recs} == {str((tmp_path / "r1").resolve())}
    assert all(r["reused"]["at"] and r["reused"]["store"] == str(store) for r in recs)
    # the images came along: every image a reused trajectory names is in the new run's blob store
    refs = {p["image"] for r in recs for m in r["trajectory"]["messages"] if isinstance(m.get("content"), list)
            for p in m["content"] if p.get("type") == "image"}
    assert refs and all((tmp_path / "r2" / "blobs" / ref[:2] / ref).is_file() for ref in refs)
    # a third folder with a new model: only it runs; the leaderboard across runs has all three
    grown = config(tmp_path, [model("a", servers["a"]), model("b", servers["b"]), model("c", servers["c"])],
                   name="grown", store=str(store))
    before = counts(servers)
    third = await run(grown, tmp_path / "r3")
    assert (third.ok, third.reused) == (JOBS, 2 * JOBS) and set(sent(before, servers)) == {"c"}
    board = leaderboard(store_report(store), {})
    cells = {r["model"]: r["cells"]["demo/tools"] for r in board["rows"]}
    assert {m: c["mean"] for m, c in cells.items()} == {"a": 0.0, "b": 1.0, "c": 1.0}
    assert cells["a"]["origin"]["runs"] == [str((tmp_path / "r1").resolve())]
    assert cells["c"]["origin"]["runs"] == [str((tmp_path / "r3").resolve())]


async def test_an_edited_entry_is_a_new_row_of_the_leaderboard_across_runs(
        tmp_path: Path, servers: dict[str, SimServer]) -> None:
    store = tmp_path / "store"
    await run(config(tmp_path, [model("a", servers["a"], params={"temperature": 0.2})], store=str(store)),
              tmp_path / "r1")
    await run(config(tmp_path, [model("a", servers["a-right"], params={"temperature": 0.9})], name="hot",
                     store=str(store)), tmp_path / "r2")
    rows = store_report(store)["rows"]
    assert len(rows) == 2 and all(r["model"].startswith("a [") for r in rows), "one name, two fingerprints"
    assert sorted(r["mean"] for r in rows) == [0.0, 1.0]


async def test_records_from_before_fingerprints_are_kept_aside_and_their_jobs_run_again(
        tmp_path: Path, servers: dict[str, SimServer]) -> None:
    run_dir = tmp_path / "run"
    path = config(tmp_path, [model("a", servers["a-right"])])
    await run(path, run_dir)
    # the folder as an older fasteval left it: records without fingerprints, a manifest without identity
    old = []
    for line in (run_dir / "records.jsonl").read_bytes().splitlines():
        rec = orjson.loads(line)
        for key in ("fingerprint", "components", "reused"):
            rec.pop(key)
        names = "\x1f".join(str(rec[k]) for k in ("model", "suite", "setting", "task_id", "seed"))
        rec["job_id"] = hashlib.sha256(names.encode()).hexdigest()[:20]  # the id of names alone
        old.append(orjson.dumps(rec) + b"\n")
    (run_dir / "records.jsonl").write_bytes(b"".join(old))
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    del manifest["identity"]
    (run_dir / "manifest.json").write_bytes(orjson.dumps(manifest))
    (run_dir / "index.sqlite").unlink()
    pv = preview(load_config(path), RunOptions(run_dir=run_dir))
    assert pv.unkeyed == JOBS and pv.by_model_suite[("a", "demo")]["new"] == JOBS
    before = counts(servers)
    res = await run(path, run_dir)
    assert res.ok == JOBS and sent(before, servers).keys() == {"a-right"}
    assert status(run_dir)["done"] == JOBS, "the old records are not counted beside the new ones"
    assert (run_dir / "records.jsonl").read_bytes().startswith(b"".join(old))


async def test_two_entries_of_one_suite_whose_files_share_task_ids_are_different_jobs(tmp_path: Path) -> None:
    for name, answer in (("one", "4"), ("two", "5")):
        (tmp_path / f"{name}.jsonl").write_text("".join(
            orjson.dumps({"id": f"q{i}", "prompt": f"What is 2 + 2? ({name})", "answer": answer}).decode() + "\n"
            for i in range(3)))
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump({
        "seeds": 1, "models": [{"name": "m", "provider": "sim", "policy": "direct"}],
        "suites": [{"name": "jsonl", "options": {"path": "one.jsonl"}}, {"name": "jsonl", "options": {"path": "two.jsonl"}}]}))
    run_dir = tmp_path / "run"
    res = await run(path, run_dir)
    recs = [orjson.loads(ln) for ln in (run_dir / "records.jsonl").read_bytes().splitlines()]
    assert res.ok + res.errors == 6 and len({r["job_id"] for r in recs}) == 6
    assert len({r["fingerprint"] for r in recs}) == 6 and len({r["components"]["suite"] for r in recs}) == 2
    assert status(run_dir)["total"] == 6
    again = await run(path, run_dir)
    assert (again.ok, again.skipped) == (0, 6)


async def test_a_renamed_model_is_explained_not_guessed(tmp_path: Path) -> None:
    """A model renamed with nothing else changed: its jobs are new in this folder (names are part of a
    job's id), and the dry run says why, naming the records with the same fingerprint."""
    run_dir = tmp_path / "run"
    sim = {"provider": "sim", "policy": "tools", "model": "sim-x"}  # the model id stays; only the name moves
    assert (await run(config(tmp_path, [{"name": "a", **sim}]), run_dir)).ok == JOBS
    pv = preview(load_config(config(tmp_path, [{"name": "a-renamed", **sim}], name="renamed")),
                 RunOptions(run_dir=run_dir))
    change = pv.changes[("a-renamed", "demo", "tools")]
    assert change.state == "new" and change.note is not None
    assert "the same fingerprint as the records of a/demo/tools" in change.note, change.note
    assert pv.by_model_suite[("a-renamed", "demo")] == {"reused": 0, "store": 0, "new": JOBS, "changed": 0}
