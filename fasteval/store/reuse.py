"""Reusing a store's records: a planned job whose fingerprint has an ok record there is not run.

The store's record is copied into the run under the job's names (model, suite, setting and the
run's job id: a fingerprint ignores names) with ``reused`` saying where it came from: the run
that computed it, when, on which host, and the store. Its images come along. Nothing is written
back into the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from fasteval.core.types import Job
from fasteval.store.blobs import copy_blobs, image_refs
from fasteval.store.reader import StoreView
from fasteval.store.segments import BLOBS

CHUNK = 8192
"""Fingerprints matched per numpy call: memory stays flat however long the plan."""


def relabelled(doc: dict[str, Any], job: Job, store: Path) -> dict[str, Any]:
    """The store's record as this run's record of ``job``, with its provenance."""
    rec = dict(doc["record"])
    was = {k: rec.get(k) for k in ("job_id", "model", "suite", "setting")}
    rec.update(job_id=job.job_id, model=job.model, suite=job.suite, setting=job.setting, task_id=job.task_id,
               seed=job.seed, fingerprint=job.fingerprint, components=job.identity.components())
    rec["reused"] = {**(doc.get("stored") or {}), "store": str(store), "was": was}
    return rec


def matches(view: StoreView, jobs: Iterable[Job]) -> Iterator[tuple[Job, int]]:
    """Each job with an ok record in ``view``, with its winner's index (in plan order)."""
    it = iter(jobs)
    while chunk := list(islice(it, CHUNK)):
        found = view.match([j.fingerprint for j in chunk])
        for job, i in zip(chunk, found.tolist(), strict=True):
            if i >= 0:
                yield job, i


def reused_records(view: StoreView, jobs: Iterable[Job], run_blobs: Path) -> Iterator[list[dict[str, Any]]]:
    """The run's copies of every job's ok store record (images copied into ``run_blobs``), in lists
    of at most ``CHUNK``: the caller writes one list while the next is read (a thread of its own).

    A winner whose line cannot be read back as the record its entry names is skipped: that job runs.
    """
    out: list[dict[str, Any]] = []
    for job, i in matches(view, jobs):
        doc = view.read(i)
        if doc is None or doc.get("status") != "ok" or doc["record"].get("status") != "ok":
            continue
        rec = relabelled(doc, job, view.root)
        refs = image_refs(rec)
        if refs:
            copy_blobs(view.root / BLOBS, run_blobs, refs)
        out.append(rec)
        if len(out) >= CHUNK:
            yield out
            out = []
    if out:
        yield out
