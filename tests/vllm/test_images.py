"""Images through real vLLM (the CPU build) serving the tiny zooming Idefics3 checkpoint, end to end.

``fasteval run`` with ``serve:``: an image in the first message, ``image_zoom_in_tool`` crops
coming back in the tool message or in a user message after it, the server's prompt and image
tokens on every round, a conversation that outgrows ``--limit-mm-per-prompt``, ``local_media``
(file URLs of the blob store), ``image_resize: auto``, and a ``kill -9`` with an exact resume.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from providers.local.launcher import group_members
from tests.vllm.conftest import env, fasteval, mark_tasks, records, vlm_serve_block, wait_for, write_sweep


def zoom_sweep(tmp: Path, serve: dict[str, Any], tasks: list[dict[str, Any]], **model: Any) -> Path:
    config = write_sweep(tmp, serve, tasks, max_rounds=3, **model)
    config.write_text(config.read_text().replace("max_tokens: 48", "max_tokens: 96"))
    return config


def right(recs: list[dict[str, Any]]) -> int:
    return sum(1 for r in recs if r["score"] == 1.0)


def check_rounds(recs: list[dict[str, Any]]) -> None:
    """Every request's prompt tokens are on the record; a zoom's crop makes the next round's prompt longer."""
    for r in recs:
        by_round = r["trajectory"]["prompt_tokens_by_round"]
        assert len(by_round) == r["rounds"] and sum(by_round) == r["usage"]["prompt_tokens"], r["job_id"]
        zoomed = [c for c in r["trajectory"]["tool_calls"] if c["status"] == "ok"]
        if zoomed and r["rounds"] >= 2:
            assert by_round[1] > by_round[0] + 40, by_round  # the crop: tiles of image tokens, plus the call
    reported = [r for r in recs if r["usage"].get("image_tokens")]
    assert reported, "vLLM reports multimodal_tokens with --enable-prompt-tokens-details"
    for r in reported:
        assert r["usage"]["image_tokens"] < r["usage"]["prompt_tokens"]


def test_zoom_crops_in_tool_messages_over_local_media_an_image_limit_and_kill_9_with_an_exact_resume(
        tmp_path: Path, vllm: str, vlm_checkpoint: Path) -> None:
    tasks = mark_tasks(tmp_path, 12, two_turn=2)
    serve = vlm_serve_block(vlm_checkpoint, vllm, images=2)
    config = zoom_sweep(tmp_path, serve, tasks, tool_message_images=True, local_media=True)
    run_dir = tmp_path / "run"
    argv = fasteval("run", str(config), "--run-dir", str(run_dir), "--no-progress")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env())
    try:
        wait_for(lambda: len(records(run_dir)) >= 3 or proc.poll() is not None, 1000, "the first records")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        pgid = int(orjson.loads((run_dir / "servers" / "tiny-0.json").read_bytes())["pgid"])
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        wait_for(lambda: not group_members(pgid), 30, "every vLLM process to go after kill -9")
    finally:
        if proc.poll() is None:
            proc.kill()
    before = {r["job_id"]: r for r in records(run_dir)}
    assert 0 < len(before) < len(tasks)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env())
    assert done.returncode in (0, 1), done.stderr
    recs = records(run_dir)
    assert sorted(Counter(r["job_id"] for r in recs).values()) == [1] * len(tasks)  # each job once, none lost
    assert [r for r in recs if r["job_id"] in before] == list(before.values())  # finished records untouched
    one_turn = [r for r in recs if not r["task_id"] >= "m012"]
    assert all(r["status"] == "ok" for r in recs), [r["error"] for r in recs if r["error"]]
    zooms = [c for r in one_turn for c in r["trajectory"]["tool_calls"] if c["name"] == "image_zoom_in_tool"]
    assert len(zooms) >= 9, f"the trained checkpoint zoomed {len(zooms)} times in 12 tasks"
    # local_media: the server read every crop from the blob store (file URLs); a right colour proves it
    assert right(one_turn) >= 6, [(r["task_id"], r["answer"]) for r in one_turn]
    tool_msgs = [m for r in one_turn for m in r["trajectory"]["messages"] if m["role"] == "tool"]
    assert tool_msgs and any(isinstance(m["content"], list) for m in tool_msgs)  # crops inside tool messages
    check_rounds(recs)
    # a second question zooms again: a third image where the server takes two ends the job, in its own words
    two_turn = [r for r in recs if r["task_id"] >= "m012"]
    limited = [r for r in two_turn if r["termination"] == "image_limit"]
    assert limited, [(r["termination"], r["trajectory"]["termination_reason"]) for r in two_turn]
    for r in limited:
        assert "--limit-mm-per-prompt" in r["trajectory"]["termination_reason"] and r["error"] is None
    assert "At most" not in (run_dir / "records.jsonl").read_text()  # no request was refused by the server
    print(local_media_saving(run_dir, one_turn))


def local_media_saving(run_dir: Path, recs: list[dict[str, Any]]) -> str:
    """What file URLs saved on the last request of each trajectory: its images as base64 data URLs
    (what ``local_media: false`` sends) against their ``file://`` URLs in the blob store."""
    data_bytes = file_bytes = 0
    for r in recs:
        refs = [p["image"] for m in r["trajectory"]["messages"] if isinstance(m["content"], list)
                for p in m["content"] if p.get("type") == "image"]
        for ref in refs:
            path = run_dir / "blobs" / ref[:2] / ref
            data_bytes += len("data:image/png;base64,") + 4 * ((path.stat().st_size + 2) // 3)
            file_bytes += len(f"file://{path.resolve()}")
    n = len(recs)
    return (f"local_media: {data_bytes / n:,.0f} bytes of base64 images per request -> {file_bytes / n:,.0f} "
            f"bytes of file URLs ({n} trajectories' last requests)")


def test_zoom_crops_after_tool_messages_with_image_resize_auto(tmp_path: Path, vllm: str,
                                                               vlm_checkpoint: Path) -> None:
    tasks = mark_tasks(tmp_path, 8, seed=11)
    serve = vlm_serve_block(vlm_checkpoint, vllm, images=4)
    config = zoom_sweep(tmp_path, serve, tasks, tool_message_images=False, image_resize="auto")
    run_dir = tmp_path / "run"
    check = subprocess.run(fasteval("config", "check", str(config)), capture_output=True, text=True, timeout=120,
                           env=env())
    assert check.returncode == 0, check.stdout + check.stderr
    done = subprocess.run(fasteval("run", str(config), "--run-dir", str(run_dir), "--no-progress"),
                          capture_output=True, text=True, timeout=900, env=env())
    assert done.returncode in (0, 1), done.stderr
    recs = records(run_dir)
    assert len(recs) == 8 and all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    assert right(recs) >= 3, [(r["task_id"], r["answer"]) for r in recs]  # 4 of 8 measured; chance is 2
    moved = [m for r in recs for m in r["trajectory"]["messages"]
             if m["role"] == "user" and isinstance(m["content"], list)
             and str(m["content"][0].get("text", "")).startswith("Images returned by the tool call above")]
    assert moved, "crops follow the tool message in a user message"
    check_rounds(recs)
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert manifest["image_resize"]["tiny"]["longest_edge"] == 128  # read from the checkpoint's processor
