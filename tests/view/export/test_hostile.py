"""Records written by hand or by another tool export as what they hold, never as a crash or a leak.

A copied run folder gets records no sweep writes: a trajectory that is a string, a usage that is a
list, a seed that is text, a tool call whose arguments are not JSON, an image reference that points
out of the folder, a blob that is a symbolic link. Every format exports them, and no byte of a file
outside the run folder lands in an export.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import orjson
import pandas as pd
import pytest
from inspect_ai.log import read_eval_log

from fasteval.view.export import export_run
from tests.view.export.support import latest_records

pytestmark = pytest.mark.slow  # one real sweep per module or session, then the library's reader

SECRET = b"TOP-SECRET-OUTSIDE-THE-RUN-FOLDER"


@pytest.fixture
def hostile_run(run_folder: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run_folder, copy, ignore=shutil.ignore_patterns("index.sqlite*"))
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"\x89PNG\r\n\x1a\n" + SECRET)
    template = latest_records(run_folder)[0]
    linked = "ab" * 32  # a blob name whose file is a link out of the folder
    (copy / "blobs" / "ab").mkdir(exist_ok=True)
    (copy / "blobs" / "ab" / linked).symlink_to(outside)
    # the template's components: a record whose model, suite and setting the config has under no
    # fingerprint of its own would be kept aside as superseded, not exported (run-folder.md)
    base = {k: template[k] for k in ("model", "suite", "setting", "task_id", "components")}
    hostile = [
        {**base, "job_id": "h-string-trajectory", "seed": 90, "status": "ok", "score": 1.0, "trajectory": "oops",
         "usage": [1, 2], "metadata": "not an object"},
        {**base, "job_id": "h-text-seed", "seed": "seven", "status": "ok", "score": 0.5, "usage": {"prompt_tokens": "x"},
         "trajectory": {"messages": [
             {"role": "user", "content": [{"type": "image", "image": "../../outside.png"},
                                          {"type": "image", "image": linked}, {"type": "text", "text": "q"}]},
             {"role": "assistant", "content": None,
              "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "calc", "arguments": "{not json"}}]},
             {"role": "tool", "tool_call_id": "c1", "content": 12},
             {"role": "assistant", "content": "done"}],
             "tool_calls": [{"id": "c1", "name": "calc", "args": "{not json", "status": "error", "turn": "x"}],
             "prompt_tokens_by_round": [5, "y", 7], "turn_by_round": ["a"]}},
    ]
    with (copy / "records.jsonl").open("ab") as f:
        for rec in hostile:
            f.write(orjson.dumps(rec) + b"\n")
    return copy


def test_every_format_exports_hostile_records_and_reads_nothing_outside(hostile_run: Path, tmp_path: Path) -> None:
    parquet = export_run(hostile_run, "parquet", tmp_path / "x.parquet", rounds=True)
    df = pd.read_parquet(tmp_path / "x.parquet")
    assert parquet["jobs"] == len(df) and {"h-string-trajectory", "h-text-seed"} <= set(df.job_id)
    atif = export_run(hostile_run, "atif", tmp_path / "atif")
    assert atif["trajectories"] == len(df)
    doc = json.loads((tmp_path / "atif" / "h-text-seed.json").read_text())
    first = doc["steps"][0]["message"]
    assert [p["type"] for p in first] == ["text", "text", "text"]  # both images refused, said so
    call = doc["steps"][1]["tool_calls"][0]
    assert call["arguments"] == {"_unparsed": "{not json"}
    inspect = export_run(hostile_run, "inspect", tmp_path / "inspect")
    assert inspect["samples"] == len(df) == sum(len(read_eval_log(str(p)).samples or [])
                                                for p in (tmp_path / "inspect").glob("*.eval"))
    for path in [*(tmp_path / "atif").rglob("*"), tmp_path / "x.parquet"]:
        assert not path.is_symlink() and (path.is_dir() or SECRET not in path.read_bytes())
    for log in (tmp_path / "inspect").glob("*.eval"):
        with zipfile.ZipFile(log) as z:
            assert all(SECRET not in z.read(n) for n in z.namelist())
