"""``--estimate-from`` a run folder whose records were edited: counts of 2**63, negative tokens, strings.

A real pilot on the sim, its ``records.jsonl`` rewritten as a tamperer would (the index then
rebuilt from it, as any reader does), and the real CLI's estimate: a row no run could produce is
left out and said, and a group with nothing left to go on stays an upper bound, never an estimate
of 0 requests labelled as measured.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from fasteval.cli.main import main
from tests.engine.test_estimate import cli, write_config


@pytest.fixture(scope="module")
def pilot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("tampered")
    config = write_config(tmp)
    run = tmp / "run-pilot"
    assert main(["run", str(config), "--run-dir", str(run), "--seeds", "0", "--limit", "4", "--no-progress"]) == 0
    return config, run


def tampered(pilot: Path, tmp: Path, edit: Callable[[int, dict[str, Any]], None]) -> Path:
    """A copy of the pilot whose records ``edit`` changed (the index rebuilt from them on first read)."""
    out = tmp / "tampered"
    shutil.copytree(pilot, out)
    for name in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm"):
        (out / name).unlink(missing_ok=True)
    lines = []
    for i, line in enumerate((out / "records.jsonl").read_bytes().splitlines()):
        rec = orjson.loads(line)
        edit(i, rec)
        lines.append(json.dumps(rec).encode())  # the standard library writes ints past 64 bits
    (out / "records.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return out


def estimate(capsys: pytest.CaptureFixture[str], config: Path, run: Path, tmp: Path) -> tuple[dict[str, Any], str]:
    code, out, err = cli(capsys, "run", str(config), "--dry-run", "--estimate", "--estimate-json",
                         "--estimate-from", str(run), "--run-dir", str(tmp / "new"))
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    code, table, err = cli(capsys, "run", str(config), "--dry-run", "--estimate", "--estimate-from", str(run),
                           "--run-dir", str(tmp / "new"))
    assert code == 0, err
    return doc, table


def _absurd_usage(i: int, rec: dict[str, Any]) -> None:
    rec["usage"] = {"prompt_tokens": 2**63, "completion_tokens": -5} if i % 2 else {"prompt_tokens": "lots",
                                                                                      "completion_tokens": -(2**70)}


def test_absurd_counts_are_left_out_and_said_never_estimated_from(
        pilot: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config, run = pilot
    bad = tampered(run, tmp_path, _absurd_usage)
    doc, table = estimate(capsys, config, bad, tmp_path)
    jobs = len((run / "records.jsonl").read_bytes().splitlines())
    assert doc["refused_rows"] == {str(bad): jobs}
    for g in doc["groups"]:  # nothing left to measure: every row an upper bound, as with no evidence
        assert g["upper_bound"] and g["basis"].startswith("upper bound") and g["requests"] > 0, g
    assert f"{jobs} jobs' rows left out" in " ".join(table.split())


def test_rounds_that_are_not_a_count_never_make_zero_requests_measured(
        pilot: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config, run = pilot

    def rounds(i: int, rec: dict[str, Any]) -> None:
        rec["rounds"] = ["many", None, {"n": 3}, "x"][i % 4]

    doc, _ = estimate(capsys, config, tampered(run, tmp_path, rounds), tmp_path)
    for g in doc["groups"]:
        assert g["upper_bound"] and g["requests"] > 0, g


def test_the_plausible_rows_of_a_partly_tampered_run_still_estimate(
        pilot: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config, run = pilot
    clean, _ = estimate(capsys, config, run, tmp_path)

    first: set[tuple[str, str]] = set()

    def some(i: int, rec: dict[str, Any]) -> None:  # the first job of each group: a time no run takes
        if (rec["model"], rec["setting"]) not in first:
            first.add((rec["model"], rec["setting"]))
            rec["latency_s"] = -1.0 if i % 2 else 1e300

    bad = tampered(run, tmp_path, some)
    doc, _ = estimate(capsys, config, bad, tmp_path)
    assert doc["refused_rows"] == {str(bad): len(first)}
    measured = {(g["model"], g["setting"]): g for g in clean["groups"]}
    for g in doc["groups"]:  # measured from the other jobs: close to the untouched pilot's estimate
        assert not g["upper_bound"] and g["basis"].endswith("; 1 with impossible values left out)"), g
        assert g["requests"] == pytest.approx(measured[(g["model"], g["setting"])]["requests"], rel=0.5)
