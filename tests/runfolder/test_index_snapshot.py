"""A report's several reads see one state of the index while a sweep appends to the run."""

from __future__ import annotations

import random
from pathlib import Path

from fasteval.runfolder.index import open_index
from tests.runfolder.index_support import make_record, manifest, random_jobs, write


async def test_a_snapshot_does_not_see_jobs_a_writer_adds_meanwhile(tmp_path: Path) -> None:
    rng = random.Random(11)
    jobs = random_jobs(rng, 8)
    run = tmp_path / "run"
    manifest(run, jobs)
    first, later = jobs[: len(jobs) // 2], jobs[len(jobs) // 2:]
    await write(run, [make_record(rng, j, ok=True) for j in first], None)
    with open_index(run) as reader:
        with reader.snapshot():
            assert reader.count() == len(first)
            # The sweep's writer, with its own connection, appends and indexes the rest.
            with open_index(run) as other:
                await write(run, [make_record(rng, j, ok=True) for j in later], other)
                assert other.count() == len(jobs)
            assert reader.count() == len(first)
            assert sum(reader.group_sizes().values()) == len(first)
            assert reader.sums(["tool_calls"])[0] == len(first)
        # Outside the snapshot the same connection sees what was written.
        assert reader.count() == len(jobs)
