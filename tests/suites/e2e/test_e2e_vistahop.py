"""VistaHop end to end through ``fasteval run``: runner records (JSON), sim models, a sim judge.

Validation is exact match first, then the multimodal judge (a ``scripted`` sim keyed on gold and
response in the judge prompt), so every score is known by hand. A ``tools``-policy sim speaks the
text protocol: a scripted sim writes ``<tool_call>`` spans that the engine parses and runs on the
offline reverse image search and the crop tool until the round budget runs out (MaxRounds: no
answer, 0 without a judge call under ``reference``), which fills the calls / rounds / utilisation
figures. The live text search is not used: it needs the network.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_support import (
    cli,
    latest,
    load_fixture_module,
    report_rows,
    resume_and_rescore,
    run_summary,
    write_config,
)

vh = load_fixture_module("vistahop/conftest.py")

MODEL_SCRIPT = [
    {"match": "company owns the ship", "reply": "<think>the funnel logo</think><answer>Hapag Lloyd AG</answer>"},
    {"match": "year was it founded", "reply": "<answer>It was 1521.</answer>"},
    {"match": "painted the mural", "reply": "<answer>Frida Kahlo</answer>"},
]
LOOPER_SCRIPT = [
    {"match": "company owns the ship", "reply": '<tool_call>{"name": "image_search_tool", "arguments": {}}</tool_call>'},
    {"match": "year was it founded", "reply": '<tool_call>{"name": "image_zoom_in_tool", "arguments": '
                                              '{"bbox_2d": [0, 0, 500, 500], "label": "logo", "img_idx": 0}}</tool_call>'},
    {"match": "painted the mural", "reply": "<answer>Diego Rivera</answer>"},
]
JUDGE_SCRIPT = [
    {"match": r"Ground Truth Answer: 1521\nModel Response: It was 1521\.", "reply": "<judge>Yes</judge><reason>same year</reason>"},
]
SEEDS = 2
ROUNDS = 4
# a setting built from tools that run offline (search_crop minus the live text search)
CROP_SEARCH = {
    "name": "crop_image_search", "tools": ["image_zoom_in_tool", "image_search_tool"], "max_rounds": ROUNDS,
    "tool_protocol": "text",
    "options": {"direct": False, "all_images": False, "judge_on_max_rounds": False, "judge_retries": 3,
                "image_profile": "png_smart", "tool_options": {"image_search_tool": {"max_results": 5}}},
}


def _data(tmp_path: Path) -> Path:
    root = tmp_path / "vistahop"
    (root / "images").mkdir(parents=True)
    (root / "thumbs").mkdir()
    (root / "images" / "a.png").write_bytes(vh.png_bytes((255, 0, 0)))
    (root / "images" / "b.png").write_bytes(vh.png_bytes((0, 255, 0)))
    for i in range(3):
        (root / "thumbs" / f"t{i}.png").write_bytes(vh.png_bytes((40 * i, 20, 30), (16, 16)))
    rows = [
        vh.record("Which company owns the ship?", ["Hapag-Lloyd", "Hapag Lloyd AG"], ["images/a.png"],
                  titles=["container ship", "harbour", "logo"], thumbs=[f"thumbs/t{i}.png" for i in range(3)],
                  extra_info={"evidence_steps": 12}),
        vh.record("What year was it founded?", "1521", ["images/b.png"], level="L2"),
        vh.record("Who painted the mural?", ["Diego Rivera"], ["images/a.png"], evidence_steps=3),
        {"prompt": [{"role": "user", "content": "<image>No answer key"}], "image": ["images/a.png"]},
    ]
    path: Path = vh.write_jsonl(root / "vistahop.jsonl", rows)
    return path


def _config(tmp_path: Path) -> Path:
    return write_config(tmp_path, {
        "name": "vistahop-e2e",
        "seeds": SEEDS,
        "models": [
            {"name": "sim-answer", "provider": "sim", "policy": "scripted", "script": MODEL_SCRIPT},
            {"name": "sim-looper", "provider": "sim", "policy": "scripted", "script": LOOPER_SCRIPT},
        ],
        "roles": {"judge": {"provider": "sim", "policy": "scripted", "script": JUDGE_SCRIPT,
                            "default_reply": "<judge>No</judge><reason>differs</reason>"}},
        "suites": [{"name": "vistahop", "options": {"path": str(_data(tmp_path)), "fidelity": "reference"},
                    "settings": [{"name": "no_tool"}, CROP_SEARCH]}],
    })


def test_vistahop_runs_reports_resumes_and_rescores_from_the_cache(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, run_dir = _config(tmp_path), tmp_path / "run"
    code, _, err = cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code == 1, err  # finished, some jobs (the bad rows) errored
    jobs = 2 * 2 * 4 * SEEDS  # models × settings × rows × seeds
    assert run_summary(err) == (jobs * 3 // 4, jobs // 4, 0, jobs)

    recs = latest(run_dir)
    for r in recs:
        if r["task_id"] == "vistahop-3":
            assert (r["status"], r["error_kind"]) == ("error", "load_error")
            assert r["error"] == "vistahop.jsonl row 3: field reward_model: missing or not an object"
            continue
        assert r["status"] == "ok", r["error"]
        d = r["score_details"]
        if r["model"] == "sim-answer":
            expected = {"vistahop-0": (1.0, "em", "Hapag Lloyd AG"), "vistahop-1": (1.0, "judge", "It was 1521."),
                        "vistahop-2": (0.0, "judge", "Frida Kahlo")}[r["task_id"]]
            assert (r["score"], d["method"], d["answer"]) == expected
            assert r["tool_calls"] == 0 and r["termination"] == "answered"
        elif r["task_id"] == "vistahop-2":
            assert (r["score"], d["method"], r["tool_calls"]) == (1.0, "em", 0)
        elif r["setting"] == "no_tool":  # no tools offered: the <tool_call> text is the answer, judged No
            assert (r["score"], d["method"], r["termination"]) == (0.0, "judge", "answered")
            assert all(j["verdict"] is False for j in d["judge"])
        else:  # one call per round until the budget runs out; reference: MaxRounds has no answer
            calls = r["trajectory"]["tool_calls"]
            name = "image_search_tool" if r["task_id"] == "vistahop-0" else "image_zoom_in_tool"
            assert [c["name"] for c in calls] == [name] * ROUNDS and all(c["status"] == "ok" for c in calls)
            assert (r["rounds"], r["termination"], r["answer"]) == (ROUNDS, "max_rounds", None)
            assert (r["score"], d["method"]) == (0.0, "no_answer")
            if name == "image_search_tool":
                assert "Title 1: container ship" in calls[0]["output"] and len(calls[0]["images"]) == 3
            else:
                assert calls[0]["output"] == "Here is the zoomed image:" and len(calls[0]["images"]) == 1
            # results go back as <tool_response> user messages, images in place
            responses = [m for m in r["trajectory"]["messages"] if m["role"] == "user"][1:]
            assert len(responses) == ROUNDS
            assert responses[0]["content"][0]["text"].startswith("<tool_response>\n")

    rows = report_rows(capsys, run_dir)
    answer = rows[("sim-answer", "vistahop", "no_tool")]
    assert (answer["mean"], answer["std"], answer["n_ok"], answer["n_error"]) == (
        pytest.approx(2 / 3), 0.0, 3 * SEEDS, SEEDS)
    m = answer["suite_metrics"]  # the paper's Pass@1: errors count 0 and stay in the denominator
    assert (m["pass_at_1"], m["std"], m["runs"], m["errors"]) == (50.0, 0.0, SEEDS, SEEDS)
    assert {k: v["pass_at_1"] for k, v in m["levels"].items()} == {"L1": 0.0, "L2": 100.0, "L3": 100.0}
    search = rows[("sim-looper", "vistahop", "crop_image_search")]["suite_metrics"]
    assert (search["pass_at_1"], search["levels"]["L1"]["pass_at_1"]) == (25.0, 100.0)
    assert search["avg_tool_calls"] == 2 * ROUNDS / 4  # 4 + 4 + 0 calls, and none for the load error
    assert (search["max_rounds"], search["utilisation"]) == (ROUNDS, 50.0)
    assert search["calls_by_tool"] == {"image_search_tool": ROUNDS * SEEDS, "image_zoom_in_tool": ROUNDS * SEEDS}
    assert search["termination"] == {"AnswerSubmitted": SEEDS, "Error": SEEDS, "MaxRounds": 2 * SEEDS}

    resume_and_rescore(capsys, config, run_dir, recs)
