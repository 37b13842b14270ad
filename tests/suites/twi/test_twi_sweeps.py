"""Full sweeps of the five suites through ``fasteval run`` with sim models, direct and zoom.

``sim-a`` always answers "A" (the model DeepEyes' V* script scores 100%); ``sim-zoom`` calls
image_zoom_in_tool once on the original image, then answers. The report carries each suite's
table with the reference and fixed numbers side by side; a rerun adds nothing and rescoring
(which must lay each task out with its record's seed again) changes no score.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import releases as rel
from reference_repos import FIXTURE_COMMIT

_SUPPORT = Path(__file__).resolve().parents[1] / "e2e" / "e2e_support.py"
_spec = importlib.util.spec_from_file_location("twi_e2e_support", _SUPPORT)
assert _spec is not None and _spec.loader is not None
support = importlib.util.module_from_spec(_spec)
sys.modules["twi_e2e_support"] = support
_spec.loader.exec_module(support)

SEEDS = 2
MODELS = [
    {"name": "sim-a", "provider": "sim", "policy": "scripted", "script": [], "default_reply": "A"},
    {"name": "sim-zoom", "provider": "sim", "policy": "tools", "tool_uses": 1, "default_reply": "B"},
]
JUDGE = {"provider": "sim", "policy": "scripted", "script": [{"match": "Prediction: KL 4471", "reply": "Score: 1"}],
         "default_reply": "Score: 0"}
SETTINGS = [{"name": "direct"}, {"name": "zoom"}]


def _config(tmp_path: Path) -> Path:
    rel.write_tsv(tmp_path / "hr" / "hr_bench_4k.tsv", rel.hrbench_rows())
    suites: list[dict[str, Any]] = [
        {"name": "vstar", "options": {"path": str(rel.vstar_folder(tmp_path / "vstar"))}},
        {"name": "hrbench", "options": {"path": str(tmp_path / "hr"), "fidelity": "reference"}},
        {"name": "mme-realworld", "options": {"path": str(rel.mme_path_form(tmp_path / "mme"))}},
        {"name": "treebench", "options": {"path": str(rel.treebench_tsv(tmp_path / "TreeBench.tsv"))}},
        {"name": "visualprobe", "options": {"path": str(rel.visualprobe_release(tmp_path / "vp"))}},
    ]
    return support.write_config(tmp_path, {
        "name": "twi-e2e", "seeds": SEEDS, "models": MODELS, "roles": {"judge": JUDGE},
        "suites": [{**s, "settings": SETTINGS} for s in suites]})


N_TASKS = {"vstar": 3, "hrbench": 8, "mme-realworld": 3, "treebench": 2, "visualprobe": 2}


def test_twi_suites_sweep_direct_and_zoom(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, run_dir = _config(tmp_path), tmp_path / "run"
    code, _, err = support.cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    total = sum(N_TASKS.values()) * SEEDS * len(MODELS) * len(SETTINGS)
    assert code == 0, err
    assert support.run_summary(err) == (total, 0, 0, total)
    recs = support.latest(run_dir)
    for r in recs:
        assert r["status"] == "ok", r["error"]
        details = r["score_details"]
        assert set(details["scores"]) == {"reference", "fixed"}
        if r["suite"] != "visualprobe":
            assert sorted(details["option_order"]) == list(range(len(details["option_order"])))
        if r["setting"] == "zoom" and r["model"] == "sim-zoom":
            call = r["trajectory"]["tool_calls"][0]
            assert (r["tool_calls"], call["name"], call["status"]) == (1, "image_zoom_in_tool", "ok")
            assert call["images"] and (run_dir / "blobs" / call["images"][0][:2] / call["images"][0]).is_file()
        else:
            assert r["tool_calls"] == 0
    vstar_a = [r for r in recs if r["suite"] == "vstar" and r["model"] == "sim-a"]
    assert {r["score_details"]["shuffled"] for r in vstar_a} == {True}  # fixed: shuffled per seed
    gold_letters = {(r["task_id"], r["seed"]): r["score_details"]["gold"] for r in vstar_a}
    assert set(gold_letters.values()) != {"A"}
    hr = [r for r in recs if r["suite"] == "hrbench"]
    assert {r["score_details"]["shuffled"] for r in hr} == {False} and {r["metadata"]["fidelity"] for r in hr} == {
        "reference"}

    rows = support.report_rows(capsys, run_dir)
    table = rows[("sim-a", "vstar", "direct")]["suite_metrics"]
    assert set(table) >= {"reference", "fixed", "gap", "by_category"}
    assert table["reference"] == table["fixed"] and table["gap"] == 0.0  # "A" reads as A by both rules
    hr_table = rows[("sim-a", "hrbench", "direct")]["suite_metrics"]
    assert hr_table["reference_average"] == pytest.approx(2 / 8)  # two rotations have gold A
    assert hr_table["reference_circular"] == 0.0
    vp = rows[("sim-a", "visualprobe", "direct")]["suite_metrics"]
    assert vp["by_category"]["visual_probe_hard"]["fixed"] == 0.0
    tree = rows[("sim-a", "treebench", "direct")]["suite_metrics"]
    assert tree["miou_reference"] == 0.0 and tree["miou_fixed"] == 0.0
    support.resume_and_rescore(capsys, config, run_dir, recs)


def test_reference_judges_read_their_texts_from_the_checkout(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """VLMEvalKit's judge fallback and Mini-o3's judge, texts from the (synthetic) checkouts."""
    model = {"name": "sim-vague", "provider": "sim", "policy": "scripted", "default_reply": "It looks dark to me",
             "script": [{"match": "license plate", "reply": "<think>reading</think><answer>KL 4471</answer>"}]}
    judge = {"provider": "sim", "policy": "scripted", "default_reply": "Z",
             "script": [{"match": "SYNTH-MCQ-JUDGE", "reply": "A"}, {"match": "SYNTH-PROBE", "reply": "Score: 10"}]}
    config = support.write_config(tmp_path, {
        "name": "twi-judges", "seeds": 1, "models": [model], "roles": {"judge": judge},
        "suites": [{"name": "vstar", "options": {"path": str(rel.vstar_folder(tmp_path / "vstar")),
                                                 "fidelity": "reference", "judge": "judge"},
                    "settings": [{"name": "direct"}]},
                   {"name": "visualprobe", "options": {"path": str(rel.visualprobe_release(tmp_path / "vp")),
                                                       "fidelity": "reference"},
                    "settings": [{"name": "direct"}]}]})
    run_dir = tmp_path / "run"
    code, _, err = support.cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code == 0, err
    recs = {(r["suite"], r["task_id"]): r for r in support.latest(run_dir)}
    for tid in ("direct_attributes/sa_1000", "relative_position/sa_2000"):
        d = recs[("vstar", tid)]["score_details"]
        assert d["reference"]["matched"] == "judge" and d["reference"]["judge_replies"] == ["A"]
        assert d["scores"] == {"reference": 1.0, "fixed": 0.0} and recs[("vstar", tid)]["score"] == 1.0
    plate = recs[("visualprobe", "visual_probe_hard/123")]["score_details"]
    assert plate["scores"] == {"reference": 1.0, "fixed": None}  # "Score: 10" is 1 for Mini-o3, unreadable for us
    assert len(plate["fixed_judge_replies"]) == 5
    flag = recs[("visualprobe", "visual_probe_hard/124")]
    assert flag["score"] == 0.0 and "reference_judge_replies" not in flag["score_details"]  # no <answer>: no call
    manifest = json.loads((run_dir / "manifest.json").read_text())
    texts = json.dumps(manifest["texts"])
    assert "multiple_choice.py" in texts and "general_qa_tool.py" in texts and FIXTURE_COMMIT in texts
    support.resume_and_rescore(capsys, config, run_dir, list(support.latest(run_dir)))


@pytest.mark.slow
def test_code_setting_runs_python_on_the_image_in_the_sandbox(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The ``code`` setting (Thyme writes image-processing code): one sandbox call, then an answer."""
    config = support.write_config(tmp_path, {
        "name": "twi-code", "seeds": 1, "models": [MODELS[1]],
        "suites": [{"name": "vstar", "options": {"path": str(rel.vstar_folder(tmp_path / "vstar"))},
                    "settings": [{"name": "code"}]}],
        "run": {"sandbox": {"workers": 1}}})
    run_dir = tmp_path / "run"
    code, _, err = support.cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code == 0, err
    for r in support.latest(run_dir):
        call = r["trajectory"]["tool_calls"][0]
        assert (r["status"], call["name"], call["status"]) == ("ok", "python_image_processing", "ok"), call
        opening = next(m for m in r["trajectory"]["messages"] if m["role"] == "user")
        assert "python_image_processing" in opening["content"][-1]["text"]


def test_deepeyes_vstar_scorer_rules_then_its_judge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``scorer: deepeyes``: the rule checks, then DeepEyes' judge texts from the checkout."""
    model = {"name": "sim-eyes", "provider": "sim", "policy": "scripted", "default_reply": "\\boxed{B}",
             "script": [{"match": "glove", "reply": "<think>dark</think><answer>A</answer>"},
                        {"match": "material", "reply": "<answer>it is made of glass</answer>"}]}
    judge = {"provider": "sim", "policy": "scripted", "default_reply": "0",
             "script": [{"match": "SYNTH-EYES-JUDGE", "reply": "Judgement: 1"}]}
    config = support.write_config(tmp_path, {
        "name": "twi-deepeyes", "seeds": 1, "models": [model], "roles": {"judge": judge},
        "suites": [{"name": "vstar", "options": {"path": str(rel.vstar_folder(tmp_path / "vstar")),
                                                 "fidelity": "reference", "scorer": "deepeyes"},
                    "settings": [{"name": "direct"}]}]})
    run_dir = tmp_path / "run"
    code, _, err = support.cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code == 0, err
    recs = {r["task_id"]: r for r in support.latest(run_dir)}
    glove, cup, dog = (recs[k] for k in ("direct_attributes/sa_1000", "direct_attributes/sa_1001",
                                         "relative_position/sa_2000"))
    assert (glove["score"], glove["score_details"]["reference"]["matched"]) == (1.0, "rule")
    assert (cup["score"], cup["score_details"]["reference"]["matched"]) == (1.0, "judge")
    assert dog["score"] == 0.0 and dog["score_details"]["reference"]["pred_ans"] == "B"
    texts = json.dumps(json.loads((run_dir / "manifest.json").read_text())["texts"])
    assert "judge_result.py" in texts
