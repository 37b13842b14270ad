"""When watch mode takes a checkpoint folder: complete weights, unchanged over two looks, or a marker file.

Real folders written the way trainers write them; the serving end to end is in
tests/engine/test_series_serving.py.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from fasteval.engine.offline.watch import Completeness


def start_checkpoint(folder: Path, shards: int = 2) -> list[str]:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    (folder / "model.safetensors.index.json").write_bytes(
        orjson.dumps({"weight_map": {str(i): n for i, n in enumerate(names)}}))
    return names


def test_a_folder_is_taken_only_once_complete_and_unchanged_between_two_looks(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoint-10"
    names = start_checkpoint(folder)
    ready = Completeness()
    (folder / names[0]).write_bytes(b"\0" * 10)
    assert "weight file(s) its index names are missing" in (ready(folder) or "")
    (folder / names[1]).write_bytes(b"\0" * 10)
    assert ready(folder) == "first look"
    with (folder / names[1]).open("ab") as f:  # the trainer is still writing the last shard
        f.write(b"\0" * 10)
    assert "still being written" in (ready(folder) or "")
    assert ready(folder) is None  # unchanged since the previous look
    (folder / "optimizer.pt").write_bytes(b"\0")  # a new file is a change too
    assert ready(folder) is not None and ready(folder) is None


def test_a_marker_file_decides_instead_of_two_looks(tmp_path: Path) -> None:
    folder = tmp_path / "run" / "checkpoint-20"
    names = start_checkpoint(folder, shards=1)
    (folder / names[0]).write_bytes(b"\0" * 10)
    ready = Completeness({tmp_path / "run": "trainer_state.json"})
    assert ready(folder) == "waiting for its marker file trainer_state.json"
    (folder / "trainer_state.json").write_text("{}")
    assert ready(folder) is None  # at the first look: the trainer said it is done
    (folder / names[0]).unlink()
    assert "missing" in (ready(folder) or "")  # a marker never makes a folder without its weights loadable
