"""The jsonl loader reads an image file once however many rows name it, and never serves a stale one.

Rows that name a file a recent row named reuse its blob ref after one stat; a file changed or
removed between rows is read again (or reported as that row's error), so the memo can only
save work, never change what a task holds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyvips

from fasteval.core.types import Task
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, make_suite


def _png(path: Path, value: int) -> bytes:
    (pyvips.Image.black(12, 8, bands=3) + value).cast("uchar").write_to_file(str(path))
    return path.read_bytes()


def _dataset(folder: Path, rows: int, image: str = "img.png") -> Path:
    path = folder / "tasks.jsonl"
    path.write_text("".join(json.dumps({"id": f"t{i}", "prompt": "q", "answer": "a", "images": [image]}) + "\n"
                            for i in range(rows)))
    return path


def test_rows_naming_one_file_share_one_blob(tmp_path: Path) -> None:
    data = _png(tmp_path / "img.png", 80)
    blobs = BlobStore(tmp_path / "blobs")
    items = list(make_suite("jsonl", {"path": str(_dataset(tmp_path, 50))}, blobs).load())
    refs = {t.turns[0].images[0] for t in items if isinstance(t, Task)}
    assert len(items) == 50 and len(refs) == 1
    assert blobs.get(refs.pop()) == data


def test_a_file_changed_between_rows_is_read_again(tmp_path: Path) -> None:
    img = tmp_path / "img.png"
    first = _png(img, 80)
    blobs = BlobStore(tmp_path / "blobs")
    rows = make_suite("jsonl", {"path": str(_dataset(tmp_path, 3))}, blobs).load()
    a = next(rows)
    second = _png(img, 200)
    st = img.stat()
    os.utime(img, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a coarse clock still sees a change
    b = next(rows)
    img.unlink()
    c = next(rows)
    assert isinstance(a, Task) and isinstance(b, Task)
    assert blobs.get(a.turns[0].images[0]) == first and blobs.get(b.turns[0].images[0]) == second
    assert isinstance(c, LoadError) and "cannot be read" in c.message and "images[0]" in c.message
