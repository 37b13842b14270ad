"""The blob store under concurrent writers of the same content (threads, as tools use it)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fasteval.runfolder.blobs import BlobStore


def test_concurrent_puts_of_one_image_all_succeed(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    data = b"\x89PNG" + bytes(range(256)) * 100
    with ThreadPoolExecutor(8) as pool:
        refs = list(pool.map(lambda _: store.put(data), range(200)))
    assert len(set(refs)) == 1 and store.get(refs[0]) == data
    assert not list(tmp_path.glob("*/*.tmp-*"))


def test_missing_blob_is_a_clear_key_error(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="not in the blob store"):
        BlobStore(tmp_path).get("ab" * 32)
