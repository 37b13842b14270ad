"""A training run's series on the command line: ``config check`` and ``run`` of a series with a step
still being written (#39 items 5 and 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fasteval.cli.main import main
from tests.providers.local.conftest import make_checkpoint, serve_block, write_config


def test_config_check_notes_a_step_being_written_and_leaves_no_folder_behind(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    make_checkpoint(tmp_path / "ckpts" / "checkpoint-10")
    (tmp_path / "ckpts" / "checkpoint-20").mkdir()  # the trainer's save has only begun
    config = write_config(tmp_path, [{"name": "run7", "provider": "vllm",
                                      "serve": serve_block(tmp_path / "ckpts" / "checkpoint-*")}], gpus=[0])
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    capsys.readouterr()
    assert main(["config", "check", str(config)]) == 0
    out = capsys.readouterr()
    assert out.out.startswith(f"{config}: ok"), out
    assert f"note: series run7: skipped {tmp_path / 'ckpts' / 'checkpoint-20'}: no config.json" in out.err, out.err
    assert not list(work.iterdir()), "config check wrote into the working folder"  # was runs/config-check/servers/
