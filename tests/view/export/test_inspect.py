"""``fasteval export --format inspect``: logs that inspect-ai's own reader and ``inspect view`` take.

Every log is read with ``inspect_ai.log.read_eval_log`` (samples, scores, messages, images
resolved from attachments), its header's headline is the report's, and ``inspect view`` (the real
server, on loopback) lists every log and serves its samples.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from inspect_ai.log import list_eval_logs, read_eval_log

from fasteval.runfolder.records import read_manifest, write_manifest
from fasteval.view.export import export_run
from fasteval.view.report import report
from tests.view.export.support import latest_records

pytestmark = pytest.mark.slow  # one real sweep per module or session, then the library's reader


@pytest.fixture(scope="module")
def logs(run_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("inspect") / "logs"
    done = export_run(run_folder, "inspect", out)
    assert done["logs"] == len(report(run_folder)["rows"])
    return out


def test_read_eval_log_gets_every_sample_its_scores_and_the_reports_headline(run_folder: Path, logs: Path) -> None:
    recs: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in latest_records(run_folder):
        recs[r["model"], r["suite"], r["setting"]].append(r)
    rows = {(r["model"], r["suite"], r["setting"]): r for r in report(run_folder)["rows"]}
    seen = set()
    for info in list_eval_logs(str(logs)):
        log = read_eval_log(info, resolve_attachments=True)
        key = (log.eval.model, log.eval.task, log.eval.task_args["setting"])
        seen.add(key)
        group, row = recs[key], rows[key]
        assert log.status == "success" and log.samples is not None and len(log.samples) == len(group)
        assert log.results is not None and log.results.total_samples == len(group)
        headline = log.results.scores[0]
        assert headline.name == "fasteval"
        assert headline.metrics["mean"].value == pytest.approx(row["mean"]) and headline.metrics["std"].value == \
            pytest.approx(row["std"])
        by_uuid = {r["job_id"]: r for r in group}
        seeds = sorted({r["seed"] for r in group})
        for sample in log.samples:
            rec = by_uuid[sample.uuid]
            assert (sample.id, sample.epoch) == (rec["task_id"], seeds.index(rec["seed"]) + 1)
            assert sample.metadata["job_id"] == rec["job_id"] and sample.metadata["config_hash"]
            if rec["status"] == "ok":
                assert sample.error is None and sample.scores is not None
                assert sample.scores["fasteval"].value == rec["score"]
                both = rec["score_details"].get("scores") or {}
                for name, value in both.items():  # the reference harness's scorer beside ours (V*)
                    assert sample.scores[name].value == value
            else:
                assert sample.error is not None and sample.error.message == rec["error"] and not sample.scores
            usage = sample.model_usage[rec["model"]]
            assert (usage.input_tokens, usage.output_tokens) == (rec["usage"]["prompt_tokens"],
                                                               rec["usage"]["completion_tokens"])
        if key[1] == "vstar":
            assert {s.name for s in log.results.scores} == {"fasteval", "reference", "fixed"}
    assert seen == set(rows)


def test_messages_keep_images_tool_calls_and_results(logs: Path) -> None:
    zoom = next(p for p in logs.glob("*.eval") if "vstar-zoom_sim-tools" in p.name)
    log = read_eval_log(str(zoom), resolve_attachments=True)
    assert log.samples
    sample = log.samples[0]
    roles = [m.role for m in sample.messages]
    # the sim takes no images in a tool message: the crop went back in a user message, as it was sent
    assert roles == ["user", "assistant", "tool", "user", "assistant"]
    images = [c for m in sample.messages if not isinstance(m.content, str) for c in m.content if c.type == "image"]
    assert len(images) >= 2 and all(c.image.startswith("data:image/") for c in images)  # the task image and the crop
    call = sample.messages[1].tool_calls[0]  # type: ignore[union-attr]
    assert call.function == "image_zoom_in_tool" and "bbox_2d" in call.arguments
    result = sample.messages[2]
    assert result.tool_call_id == call.id and result.function == "image_zoom_in_tool"  # type: ignore[union-attr]
    assert sample.output.completion == sample.scores["fasteval"].answer  # type: ignore[index]
    flaky = next(p for p in logs.glob("*.eval") if "tir-synth-tool_sim-flaky" in p.name)
    errors = [s for s in (read_eval_log(str(flaky)).samples or []) if s.error is not None]
    assert errors and all("400" in e.error.message for e in errors)  # type: ignore[union-attr]


def test_a_partial_run_says_so_in_every_log(run_folder: Path, tmp_path: Path) -> None:
    copy = tmp_path / "partial"
    shutil.copytree(run_folder, copy, ignore=shutil.ignore_patterns("index.sqlite*"))
    manifest = read_manifest(copy)
    assert manifest is not None
    manifest["plan"]["total"] += 5  # five planned jobs never ran
    write_manifest(copy, manifest)
    done = export_run(copy, "inspect", tmp_path / "logs", images=False)
    assert done["partial"] is True
    for info in list_eval_logs(str(tmp_path / "logs")):
        log = read_eval_log(info, header_only=True)
        assert log.status == "cancelled" and log.eval.metadata and log.eval.metadata["partial"] is True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_inspect_view_lists_every_log_and_serves_its_samples(logs: Path, tmp_path: Path) -> None:
    port = _free_port()
    inspect = Path(sys.executable).with_name("inspect")
    with (tmp_path / "view.log").open("wb") as out:
        proc = subprocess.Popen([str(inspect), "view", "start", "--log-dir", str(logs), "--host", "127.0.0.1",
                                 "--port", str(port)], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        listing = _get_json(f"http://127.0.0.1:{port}/api/logs", proc, tmp_path / "view.log")
        names = [f["name"] for f in listing["files"]]
        assert {Path(n).name for n in names} == {p.name for p in logs.glob("*.eval")}
        log = _get_json(f"http://127.0.0.1:{port}/api/logs/{urllib.parse.quote(names[0], safe='')}", proc,
                        tmp_path / "view.log")
        assert log["eval"]["model"] and log["samples"] and log["results"]["scores"][0]["name"] == "fasteval"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _get_json(url: str, proc: subprocess.Popen[bytes], log: Path) -> Any:
    """The JSON at ``url`` once the server answers (it takes a few seconds to start)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise AssertionError(f"inspect view answered {e.code} for {url}") from None
        except (urllib.error.URLError, ConnectionError):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"inspect view did not answer {url}: {log.read_text()[-2000:]}") from None
            time.sleep(0.3)
