"""Gemini inline batches: answers are matched to requests by the metadata key we send, never by
position; a batch whose responses are missing fails its jobs instead of handing out others' answers."""

from __future__ import annotations

from pathlib import Path

import orjson

from fasteval.config.load import load_config
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep
from fasteval.runfolder.batch_journal import BatchJournal
from providers.batch.gemini import inline_results
from tests.engine.test_batch_mode import FAST, records, same_results, sim_model, sweep, write_config


def _response(text: str, key: str | None = None) -> dict[str, object]:
    item: dict[str, object] = {"response": {"candidates": [{"content": {"parts": [{"text": text}]}}]}}
    if key is not None:
        item["metadata"] = {"key": key}
    return item


async def test_reversed_inline_responses_still_give_each_job_its_own_answer(tmp_path: Path) -> None:
    inter = await run_sweep(load_config(write_config(tmp_path, sim_model("gemini"), name="i")),
                            RunOptions(run_dir=tmp_path / "inter", progress=False))
    model = sim_model("gemini", batch=FAST, batch_api={"turnaround_s": 0.05, "reverse_responses": True})
    res, _ = await sweep(write_config(tmp_path, model, name="b"), tmp_path / "batch")
    assert res.ok == inter.ok == 8 and res.errors == 0
    a, b = records(tmp_path / "inter"), records(tmp_path / "batch")
    assert a.keys() == b.keys() and all(same_results(a[k], b[k]) for k in a)
    assert not any(jb.file_id for jb in BatchJournal(tmp_path / "batch").batches.values())  # all inline


async def test_a_missing_inline_response_fails_the_batch_and_no_job_gets_another_answer(tmp_path: Path) -> None:
    model = sim_model("gemini", batch=FAST, batch_api={"turnaround_s": 0.05, "drop_responses": 1})
    res, _ = await sweep(write_config(tmp_path, model, n_tasks=3, seeds=1), tmp_path / "run")
    assert res.ok == 0 and res.errors == 3
    recs = [orjson.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_bytes().splitlines()]
    assert all(r["status"] == "error" and "2 inline responses for 3 requests" in r["error"] for r in recs)
    journal = BatchJournal(tmp_path / "run")
    assert len(journal.batches) == 1  # failed, not paid for again


def test_inline_matching_rules() -> None:
    ids = ["fe_a", "fe_b", "fe_c"]
    by_key = inline_results([_response("C", "fe_c"), _response("A", "fe_a"), _response("B", "fe_b")], ids, "b1")
    assert {r.custom_id: orjson.loads(r.body or b"")["candidates"][0]["content"]["parts"][0]["text"]
            for r in by_key} == {"fe_a": "A", "fe_b": "B", "fe_c": "C"}
    no_keys = inline_results([_response("A"), _response("B"), _response("C")], ids, "b1")
    assert [r.custom_id for r in no_keys] == ids and all(r.ok for r in no_keys)  # the documented order
    for bad in ([_response("A", "fe_a"), _response("B", "fe_b")],  # one dropped
                [_response("A", "fe_a"), _response("B", "fe_b"), _response("X", "fe_x")],  # a stranger
                [_response("A", "fe_a"), _response("A2", "fe_a"), _response("B", "fe_b")],  # a duplicate
                [_response("A", "fe_a"), _response("B"), _response("C", "fe_c")]):  # one without a key
        out = inline_results(bad, ids, "b1")
        assert [r.custom_id for r in out] == ids and all(r.kind == "fatal" and not r.ok for r in out)


def test_a_cancelled_batch_part_is_matched_by_key_or_counted_not_done() -> None:
    ids = ["fe_a", "fe_b", "fe_c"]
    part = inline_results([_response("B", "fe_b")], ids, "b1", complete=False)
    assert [(r.custom_id, r.ok) for r in part] == [("fe_b", True)]
    assert inline_results([_response("B")], ids, "b1", complete=False) == []  # cannot be placed: not done
    assert inline_results([], ids, "b1", complete=False) == []
