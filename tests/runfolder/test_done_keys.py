"""The resume array answers exactly what a set of the keys would, for any hex key, through every way
a row can change: new lines, reruns, rows changed in place or deleted, folds, a merge's union."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from fasteval.runfolder import done_keys
from fasteval.runfolder.done_keys import DoneKeys, key_bytes
from fasteval.runfolder.index import INDEX, open_index
from tests.runfolder.index_support import assert_derived_agree, make_record, manifest, random_jobs, write


def _keys(rng: random.Random, n: int) -> list[str]:
    widths = (20, 32, 64, 20, 20, 7)
    return [f"{rng.getrandbits(4 * w):0{w}x}" for w in (rng.choice(widths) for _ in range(n))]


def _array(keys: dict[str, int]) -> DoneKeys:
    import numpy as np

    raw = [key_bytes(k) for k in keys]
    assert all(r is not None for r in raw)
    buf = np.frombuffer(b"".join(r for r in raw if r is not None), dtype=np.uint8).reshape(len(keys), 16)
    hi, lo = done_keys._halves(buf)
    order = np.lexsort((lo, hi))
    state = np.fromiter(keys.values(), dtype=np.uint8, count=len(keys))
    return DoneKeys(hi[order], lo[order], state[order])


@pytest.mark.parametrize("seed", range(3))
def test_the_array_answers_as_a_set_of_keys_does(seed: int) -> None:
    rng = random.Random(seed)
    stored = {k: rng.choice((done_keys.OK, done_keys.ERRORED)) for k in _keys(rng, 3000)}
    # keys that share their first 64 bits (three of them), and one that differs only in length
    stored.update({"0123456789abcdef" + s: done_keys.OK for s in ("0001", "0002", "0003")})
    stored["0123456789abcdef0001000000000000"] = done_keys.OK
    ok = {k for k, s in stored.items() if s == done_keys.OK}
    array = _array(stored)
    queries = [*stored, *_keys(rng, 3000), "0123456789abcdef0004", "0123456789ABCDEF0001", "not hex", "",
               "0123456789abcdef000", "0123456789abcdef00010"]
    assert array.contains_many(queries).tolist() == [q in ok for q in queries]
    assert len(array) == len(ok) and ("0123456789abcdef0002" in array) and ("zz" not in array)
    every = DoneKeys(array._hi, array._lo, array._state, ok_only=False)
    assert every.contains_many(queries).tolist() == [q in stored for q in queries]
    # a block of job ids given as raw bytes answers the same
    ids = [k for k in queries if len(k) == 20 and k == k.lower() and all(c in "0123456789abcdef" for c in k)]
    raw = b"".join(bytes.fromhex(k) for k in ids)
    assert array.contains_keys(raw, 10).tolist() == [k in ok for k in ids]


async def test_changes_without_a_new_line_are_seen_and_folds_keep_the_answer(tmp_path: Path) -> None:
    """A row deleted or changed in place (no new record line) is logged by a trigger; the array
    folds the changes in once they are many, and answers the same before and after."""
    rng = random.Random(4)
    run = tmp_path / "run"
    jobs = random_jobs(rng, n_tasks=40, seeds=3)
    manifest(run, jobs)
    with open_index(run) as index:
        await write(run, [make_record(rng, j) for j in jobs], index)
        assert_derived_agree(run, index)
    db = sqlite3.connect(run / INDEX)
    gone, flipped = jobs[0].job_id, jobs[1].job_id
    db.execute("DELETE FROM jobs WHERE job_id = ?", (gone,))
    db.execute("UPDATE jobs SET ok = 1 - ok, status = CASE ok WHEN 1 THEN 'error' ELSE 'ok' END WHERE job_id = ?",
               (flipped,))
    db.execute("UPDATE meta SET value = value - 1 WHERE key = 'n_jobs'")
    db.commit()
    logged = db.execute("SELECT key FROM done_log").fetchall()
    db.close()
    assert {k for (k,) in logged} == {gone, flipped}
    with open_index(run) as index:
        keys = index.done_keys(ok_only=False)
        assert gone not in keys and flipped in keys
        rows = {r.job_id: r for r in index.rows()}
        assert index.done_keys().contains_many(list(rows)).tolist() == [r.status == "ok" for r in rows.values()]
        # many new rows: the writer folds them into the array as it closes, and the log goes
        more = random_jobs(random.Random(5), n_tasks=900, seeds=3)
        await write(run, [make_record(rng, j) for j in more], index)
    with open_index(run) as index:  # (the tampered rows stay as they are: the index's own rows are the reference)
        folded = index._db.execute("SELECT value FROM meta WHERE key = 'done_n'").fetchone()
        rows = {r.job_id: r for r in index.rows()}
        assert int(folded[0]) == len(rows)  # the array holds every key itself: nothing left to apply
        assert index._db.execute("SELECT count(*) FROM done_log").fetchone()[0] == 0
        assert index.done_keys().contains_many(list(rows)).tolist() == [r.status == "ok" for r in rows.values()]
        assert len(index.done_keys(ok_only=False)) == len(rows)  # (the deleted job was written again since)


def test_a_union_keeps_each_keys_best_state() -> None:
    a = _array({"aa" * 10: done_keys.ERRORED, "bb" * 10: done_keys.OK})
    b = _array({"aa" * 10: done_keys.OK, "cc" * 10: done_keys.ERRORED})
    merged = DoneKeys(*done_keys.union([a, b]), ok_only=False)
    assert len(merged) == 3
    assert DoneKeys(merged._hi, merged._lo, merged._state).contains_many(["aa" * 10, "bb" * 10, "cc" * 10]).tolist() \
        == [True, True, False]


async def test_a_fresh_run_folders_writer_leaves_the_array_made(tmp_path: Path) -> None:
    """An index built from scratch leaves the array to later (a reader never needs it), so the
    first sweep's writer makes it as it closes: the next resume reads one array."""
    rng = random.Random(6)
    run = tmp_path / "run"
    jobs = random_jobs(rng, n_tasks=30, seeds=2)
    manifest(run, jobs)
    with open_index(run) as index:
        assert index._db.execute("SELECT value FROM meta WHERE key = 'done_offset'").fetchone() is None
        await write(run, [make_record(rng, j) for j in jobs], index)
    with open_index(run) as index:
        folded = index._db.execute("SELECT value FROM meta WHERE key = 'done_n'").fetchone()
        assert folded is not None and int(folded[0]) == index.count()


async def test_the_first_reader_after_a_sweeps_writer_writes_nothing(tmp_path: Path) -> None:
    """The writer leaves the index settled (``RunIndex.settle``): the array folded and the planner's
    statistics made, so the first ``status`` or resume after a sweep pays for neither (at 10^6 jobs
    ANALYZE alone was ~0.4 s of the first status) and leaves the index file as it found it."""
    from fasteval.view.report import status

    rng = random.Random(7)
    run = tmp_path / "run"
    jobs = random_jobs(rng, n_tasks=600, seeds=2)  # past the 1,000 rows statistics are kept from
    manifest(run, jobs)
    with open_index(run) as index:
        await write(run, [make_record(rng, j, size=100) for j in jobs], index)
    db = sqlite3.connect(run / INDEX)
    try:
        stats = dict(db.execute("SELECT idx, stat FROM sqlite_stat1 WHERE tbl = 'jobs'").fetchall())
    finally:
        db.close()
    assert int(stats["jobs_key"].split()[0]) == len(jobs), stats
    before = (run / INDEX).stat().st_mtime_ns, (run / INDEX).read_bytes()
    import orjson

    oks = sum(orjson.loads(line)["status"] == "ok" for line in (run / "records.jsonl").read_bytes().splitlines())
    assert status(run)["done"] == oks
    with open_index(run) as index:
        assert len(index.done_keys(ok_only=False)) == len(jobs)
    assert ((run / INDEX).stat().st_mtime_ns, (run / INDEX).read_bytes()) == before, "a reader wrote the index"
