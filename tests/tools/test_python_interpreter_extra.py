"""python_interpreter's pre-bound packages: bound as the reference binds them when the ``vtb``
extra is installed, and a NameError that names the extra when it is not (real sandbox pool)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from fasteval.core.types import Task
from fasteval.runfolder.blobs import BlobStore
from fasteval.tools.base import ToolContext, make_tool
from fasteval.tools.python_tools import missing_extra_hint
from sandbox import SandboxPool


@pytest_asyncio.fixture
async def pool() -> AsyncIterator[SandboxPool]:
    async with SandboxPool(1) as p:
        yield p


@pytest.mark.slow
async def test_pandas_is_bound_or_the_error_names_the_extra(tmp_path: Path, pool: SandboxPool) -> None:
    ctx = ToolContext(blobs=BlobStore(tmp_path), task=Task(id="t", turns=[]), images=[], fidelity="reference",
                      services={"sandbox": pool})
    res = await make_tool("python_interpreter").run({"code": "print(pd.DataFrame({'a': [1, 2]}).a.sum())"}, ctx)
    if importlib.util.find_spec("pandas") is not None:
        assert res.status == "ok" and json.loads(res.output)["stdout"].strip() == "3"
    else:
        assert res.status == "error"
        assert "pip install 'fasteval[vtb]'" in json.loads(res.output)["stderr"]
        assert res.error is not None and "fasteval[vtb]" in res.error


def test_hint_only_for_pre_bound_names() -> None:
    assert missing_extra_hint("NameError: name 'foo' is not defined") is None
    assert missing_extra_hint("ValueError: x") is None
    hint = missing_extra_hint("Traceback...\nNameError: name 'BeautifulSoup' is not defined")
    if importlib.util.find_spec("bs4") is None:
        assert hint is not None and "beautifulsoup4" in hint
