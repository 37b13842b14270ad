"""The viewer's data access: summary equals the report, /jobs paging and filters, one record, blobs."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from fasteval.view.data import JobQuery, NotFound, RunSet, question_text, sniff_image_type
from fasteval.view.report import report


def test_summary_rows_are_the_report_rows(demo_run: Path) -> None:
    runs = RunSet([demo_run])
    summary = runs.summary()
    assert [r["name"] for r in summary["runs"]] == ["demo"]
    assert summary["runs"][0]["rows"] == report(demo_run)["rows"]
    assert summary["runs"][0]["by_status"] == {"ok": 93, "error": 3}


def test_trajectory_stats_count_tool_calls_and_mix(demo_run: Path) -> None:
    stats = RunSet([demo_run]).summary()["runs"][0]["stats"]
    oracle = "sim-oracle / tir-synth / tool"
    assert sum(stats["tool_calls"][oracle].values()) == 16
    n_calls = sum(int(k) * v for k, v in stats["tool_calls"][oracle].items())
    assert stats["tool_mix"][oracle] == {"python_image_processing": n_calls}
    assert "sim-guess / tir-synth / no-tool" not in stats["tool_mix"]


def test_jobs_pages_cover_every_job_once(demo_run: Path) -> None:
    runs = RunSet([demo_run])
    seen: list[str] = []
    page = 1
    while True:
        res = runs.jobs(JobQuery(page=page, per_page=25))
        assert res["total"] == 96 and res["pages"] == 4
        seen += [r["job_id"] for r in res["rows"]]
        if page == res["pages"]:
            break
        page += 1
    assert len(seen) == len(set(seen)) == 96


def test_filters_narrow_the_jobs(demo_run: Path) -> None:
    runs = RunSet([demo_run])
    errors = runs.jobs(JobQuery(status="error"))
    assert errors["total"] == 3
    assert {(r["model"], r["error_kind"]) for r in errors["rows"]} == {("sim-flaky", "fatal")}
    tool = runs.jobs(JobQuery(model="sim-oracle", setting="tool", seed=1))
    assert tool["total"] == 8 and all(r["tool_calls"] >= 1 for r in tool["rows"])
    solved = runs.jobs(JobQuery(score_min=1.0, per_page=500))
    assert solved["total"] == sum(1 for r in solved["rows"] if r["score"] == 1.0)
    assert 0 < solved["total"] < 96
    lost = runs.jobs(JobQuery(score_max=0.5, model="sim-oracle", setting="tool"))
    assert lost["total"] == 0
    assert runs.jobs(JobQuery(run="demo", q="contrast"))["total"] == 12


def test_text_search_finds_the_question_and_the_answer(demo_run: Path) -> None:
    runs = RunSet([demo_run])
    res = runs.jobs(JobQuery(q="LOW LIGHT", per_page=500))  # only the contrast question says it
    assert res["total"] == 12 and all("contrast" in r["task_id"] for r in res["rows"])
    job = runs.job(res["rows"][0]["job_id"])
    assert "low light" in question_text(job["record"]).lower()
    answer = next(r for r in runs.jobs(JobQuery(status="ok", per_page=500))["rows"])
    rec = runs.job(answer["job_id"])["record"]
    found = runs.jobs(JobQuery(q=str(rec["answer"]), per_page=500))
    assert answer["job_id"] in {r["job_id"] for r in found["rows"]}


def test_sort_orders_the_whole_match_not_the_page(demo_run: Path) -> None:
    runs = RunSet([demo_run])
    asc = runs.jobs(JobQuery(sort="latency_s", per_page=10))
    desc = runs.jobs(JobQuery(sort="latency_s", desc=True, per_page=10))
    lat = [r["latency_s"] for r in asc["rows"]]
    assert lat == sorted(lat)
    assert desc["rows"][0]["latency_s"] == max(r["latency_s"] for r in runs.jobs(JobQuery(per_page=500))["rows"])


def test_one_job_and_a_task_across_models(demo_run: Path) -> None:
    runs = RunSet([demo_run])
    row = runs.jobs(JobQuery(model="sim-oracle", setting="tool", q="contrast"))["rows"][0]
    job = runs.job(row["job_id"])
    assert job["run"] == "demo" and job["record"]["job_id"] == row["job_id"]
    assert job["record"]["trajectory"]["tool_calls"][0]["args"]["code"]
    cmp = runs.compare(row["task_id"])
    assert len(cmp["jobs"]) == 12  # 3 models × 2 settings × 2 seeds
    assert {j["record"]["task_id"] for j in cmp["jobs"]} == {row["task_id"]}
    with pytest.raises(NotFound):
        runs.job("0" * 20)
    with pytest.raises(NotFound):
        runs.compare("no-such-task")


def test_blob_path_sniffs_the_type_and_refuses_paths(demo_run: Path) -> None:
    runs = RunSet([demo_run])
    rec = runs.job(runs.jobs(JobQuery(q="contrast", model="sim-oracle", setting="tool"))["rows"][0]["job_id"])["record"]
    ref = rec["trajectory"]["tool_calls"][0]["images"][0]
    path, ctype = runs.blob_path("demo", ref)
    assert ctype == "image/png" and path.read_bytes().startswith(b"\x89PNG")
    for bad in ("../manifest.json", "a" * 63, "A" * 64):
        with pytest.raises(NotFound):
            runs.blob_path("demo", bad)
    with pytest.raises(NotFound):
        runs.blob_path("demo", "0" * 64)
    assert sniff_image_type(b"\xff\xd8\xff\xe0") == "image/jpeg"
    assert sniff_image_type(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff_image_type(b"hello") == "application/octet-stream"


def test_new_records_appear_and_a_torn_line_is_ignored(fresh_run: Path) -> None:
    runs = RunSet([fresh_run])
    assert runs.jobs(JobQuery())["total"] == 96
    first = (fresh_run / "records.jsonl").read_bytes().split(b"\n", 1)[0]
    rec = orjson.loads(first)
    rec.update(job_id="f" * 20, task_id="appended-task", status="error", score=None, error="boom",
               error_kind="timeout")
    with (fresh_run / "records.jsonl").open("ab") as f:
        f.write(orjson.dumps(rec) + b"\n" + b'{"job_id": "torn')
    assert runs.jobs(JobQuery())["total"] == 97
    assert runs.jobs(JobQuery(error_kind="timeout"))["rows"][0]["task_id"] == "appended-task"
    assert runs.summary()["runs"][0]["by_status"]["error"] == 4


def test_a_folder_without_manifest_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="not a run folder"):
        RunSet([tmp_path])


def test_two_runs_with_the_same_name_get_distinct_names(demo_run: Path, fresh_run: Path) -> None:
    runs = RunSet([demo_run, fresh_run])
    assert list(runs.runs) == ["demo", "demo-2"]
    assert runs.jobs(JobQuery())["total"] == 192
    assert runs.jobs(JobQuery(run="demo-2"))["total"] == 96
    assert len(runs.compare(runs.jobs(JobQuery())["rows"][0]["task_id"])["jobs"]) == 24


def test_sorted_pages_cover_every_job_once_and_unscored_jobs_come_last(demo_run: Path) -> None:
    runs = RunSet([demo_run])
    for desc in (False, True):
        rows = []
        for page in range(1, 5):
            rows += runs.jobs(JobQuery(sort="score", desc=desc, page=page, per_page=25))["rows"]
        assert len({r["job_id"] for r in rows}) == 96
        scores = [r["score"] for r in rows]
        scored = [s for s in scores if s is not None]
        assert scores[len(scored):] == [None] * 3  # the three errored jobs
        assert scored == sorted(scored, reverse=desc)


def test_text_search_finds_words_split_across_read_chunks(demo_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fasteval.view import data

    whole = {r["job_id"] for r in RunSet([demo_run]).jobs(JobQuery(q="bright round", per_page=500))["rows"]}
    monkeypatch.setattr(data._TextSearch, "CHUNK", 7)  # every hit straddles some chunk boundary
    small = {r["job_id"] for r in RunSet([demo_run]).jobs(JobQuery(q="bright round", per_page=500))["rows"]}
    assert whole == small and len(whole) == 12


def test_deep_pages_agree_with_shallow_paging(demo_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fasteval.view import data

    shallow = [r["job_id"] for p in range(1, 11) for r in RunSet([demo_run]).jobs(JobQuery(page=p, per_page=10))["rows"]]
    monkeypatch.setattr(data, "DEEP_PAGE", 0)  # every page past the first through the cached list
    deep = [r["job_id"] for p in range(1, 11) for r in RunSet([demo_run]).jobs(JobQuery(page=p, per_page=10))["rows"]]
    assert deep == shallow and len(set(deep)) == 96
    filtered = RunSet([demo_run]).jobs(JobQuery(page=2, per_page=2, status="error"))
    assert filtered["total"] == 3 and len(filtered["rows"]) == 1
