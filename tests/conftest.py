"""Session-wide isolation: no test may touch the user's shared cache in ~/.cache/fasteval."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("fasteval-cache")
    monkeypatch.setenv("FASTEVAL_CACHE_DIR", str(path))
    yield path
