"""The store's reading rules: first ok wins, unindexed and torn lines, lines that lie, gc, import."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import orjson
import pytest

from fasteval.core.types import Record
from fasteval.store.manage import gc, import_run, listing
from fasteval.store.reader import StoreError, list_segments, open_view
from fasteval.store.segments import SEGMENTS, SegmentWriter, ensure_store, entry_of, envelope


def fp(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()[:32]


def record(i: int, status: str = "ok", answer: str = "a") -> Record:
    return Record(job_id=f"j{i}", model="m", suite="s", setting="d", task_id=f"t{i}", seed=0, status=status,  # type: ignore[arg-type]
                  score=1.0 if status == "ok" else None, answer=answer if status == "ok" else None, fingerprint=fp(i),
                  components={"model": "a" * 16, "suite": "b" * 16, "setting": "c" * 16})


def lines(recs: list[Record], run: str = "r") -> list[tuple[bytes, object]]:
    out = []
    for r in recs:
        line = orjson.dumps(r) + b"\n"
        out.append((envelope(r.fingerprint, r.status == "ok", {"run": run, "at": "2026-01-01"}, line),
                    entry_of(r.fingerprint, r.components, r.status == "ok", 0, 0)))
    return out


def write(root: Path, recs: list[Record], run: str = "r", seal: bool = True) -> SegmentWriter:
    ensure_store(root)
    w = SegmentWriter(root)
    w.write(lines(recs, run))  # type: ignore[arg-type]
    if seal:
        w.close()
    return w


def test_one_winner_per_fingerprint_the_first_ok_in_store_order(tmp_path: Path) -> None:
    root = tmp_path / "store"
    write(root, [record(1, "error"), record(2, answer="first")], run="early")
    write(root, [record(1, answer="later ok"), record(2, answer="second"), record(3, "error")], run="late")
    view = open_view(root)
    assert (len(view), view.ok, view.lines) == (3, 2, 5)
    got = {d["record"]["task_id"]: (d["status"], d["record"]["answer"], d["stored"]["run"])
           for i in range(len(view)) if (d := view.read(i)) is not None}
    assert got == {"t1": ("ok", "later ok", "late"), "t2": ("ok", "first", "early"), "t3": ("error", None, "late")}
    assert list(view.match([fp(1), fp(3), fp(9)]) >= 0) == [True, False, False], "an error is no reuse"
    again = open_view(root)
    assert (again.winners == view.winners).all(), "every reader picks the same winners"


def test_lines_a_killed_writer_left_without_entries_count_and_a_torn_line_does_not(tmp_path: Path) -> None:
    root = tmp_path / "store"
    w = write(root, [record(1), record(2)], seal=False)
    with w.path.open("ab") as f:  # killed after writing two lines, before their entries; then in a third
        for line, _ in lines([record(3), record(4)]):
            f.write(line)  # type: ignore[arg-type]
        f.write(lines([record(5)])[0][0][:40])  # type: ignore[index]
    view = open_view(root)
    assert len(view) == 4 and set(view.match([fp(i) for i in range(1, 6)]).tolist()) != {-1}
    assert (view.match([fp(5)]) == -1).all()
    assert all(view.read(i) is not None for i in range(len(view)))


def test_an_entry_whose_line_says_otherwise_is_no_record(tmp_path: Path) -> None:
    root = tmp_path / "store"
    w = write(root, [record(1), record(2)])
    data = bytearray(w.path.read_bytes())
    data[20:52] = fp(7).encode()  # a line that no longer names the fingerprint its entry does
    w.path.write_bytes(bytes(data))
    view = open_view(root)
    i = int(view.match([fp(1)])[0])
    assert i >= 0 and view.read(i) is None, "checked when read: the job would run, never take a wrong record"


def test_gc_compacts_idle_segments_into_their_winners_and_leaves_live_ones_alone(tmp_path: Path) -> None:
    root = tmp_path / "store"
    write(root, [record(1, "error"), record(2)])
    write(root, [record(1), record(2, answer="dup"), record(3)])
    live = write(root, [record(4)], seal=False)  # this process is still writing it
    before = open_view(root)
    winners = {d["fingerprint"]: d["record"]["answer"] for i in range(len(before)) if (d := before.read(i))}
    c = gc(root)
    assert (c.segments_before, c.segments_after, c.left_alone) == (3, 2, 1)
    assert (c.lines_before, c.lines_after) == (5, 3)
    after = open_view(root)
    assert {d["fingerprint"]: d["record"]["answer"] for i in range(len(after)) if (d := after.read(i))} == winners
    assert live.path.exists() and after.lines == 4
    live.write(lines([record(5)]))  # type: ignore[arg-type]
    assert len(open_view(root)) == 5
    assert not [n for n in os.listdir(root / SEGMENTS) if n.startswith(".")], "no temporary file left"


def test_a_store_that_is_not_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not a results store"):
        open_view(tmp_path)
    assert list_segments(tmp_path) == []


@pytest.mark.slow
async def test_import_puts_a_runs_records_in_once_and_a_run_without_a_store_is_caught_up(tmp_path: Path) -> None:
    from fasteval.config.load import load_config
    from fasteval.engine.plan import RunOptions
    from fasteval.engine.run.sweep import run_sweep
    from tests.engine.test_resume import make_config

    path = make_config(tmp_path, n_tasks=2, seeds=1)
    await run_sweep(load_config(path), RunOptions(run_dir=tmp_path / "run", progress=False))
    root = tmp_path / "store"
    done = import_run(root, tmp_path / "run")
    assert (done.added, done.already) == (4, 0)
    assert import_run(root, tmp_path / "run").added == 0
    assert {e["run"] for e in listing(root)} == {str((tmp_path / "run").resolve())}
    # a run folder that ran without the store, then with it: its records go in before anything else
    other = tmp_path / "store2"
    cfg = load_config(path)
    cfg.store = other
    res = await run_sweep(cfg, RunOptions(run_dir=tmp_path / "run", progress=False))
    assert (res.ok, res.skipped) == (0, 4)
    assert len(list(listing(other))) == 4


def test_a_fingerprint_ending_in_zero_bytes_is_matched_and_read(tmp_path: Path) -> None:
    root = tmp_path / "store"
    rec = record(0)
    rec.fingerprint = "ab" * 14 + "0000"  # numpy's S16 drops trailing zero bytes when read out
    rec.components = {"model": "00" * 8, "suite": "b" * 14 + "00", "setting": "c" * 16}
    write(root, [rec, record(1)])
    view = open_view(root)
    i = int(view.match([rec.fingerprint])[0])
    assert i >= 0 and view.read(i) is not None


def test_a_writer_whose_segment_a_gc_took_for_abandoned_goes_on_in_a_new_one(tmp_path: Path) -> None:
    root = tmp_path / "store"
    write(root, [record(0)])
    w = write(root, [record(1)], seal=False)
    old = w.path
    gc(root, stale_s=-1)  # idle "forever": a run waiting a day on its batches looks like this
    assert not old.exists()
    w.write(lines([record(2)]))  # type: ignore[arg-type]
    assert w.path != old and len(open_view(root)) == 3


def test_fingerprints_that_share_their_first_half_are_told_apart(tmp_path: Path) -> None:
    root = tmp_path / "store"
    recs = []
    for i, tail in enumerate(("0" * 16, "1" * 16, "f" * 16)):
        rec = record(i)
        rec.fingerprint = "7" * 16 + tail  # the search runs on the first half; the second confirms
        recs.append(rec)
    write(root, recs[:1] + recs[2:])
    view = open_view(root)
    found = view.match([r.fingerprint for r in recs]).tolist()
    assert found[1] == -1 and found[0] >= 0 and found[2] >= 0 and found[0] != found[2]
    doc = view.read(found[2])
    assert doc is not None and doc["fingerprint"] == recs[2].fingerprint
