"""The five suites on synthetic releases in each official format: loaders, the quirks under
``reference``, their absence under ``fixed``, option order per seed recorded on the score."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import releases as rel

from fasteval.core.types import Task, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, Suite, make_suite


def tasks_of(suite: Suite) -> list[Task]:
    items = list(suite.load())
    assert all(isinstance(i, Task) for i in items), [i for i in items if isinstance(i, LoadError)]
    return [i for i in items if isinstance(i, Task)]


def setting(suite: Suite, fidelity: str, name: str = "direct") -> Setting:
    s = next(s for s in suite.default_settings() if s.name == name)
    s.fidelity = fidelity
    return s


async def score(suite: Suite, task: Task, reply: str | None, seed: int, s: Setting,
                services: dict[str, Any] | None = None) -> Score:
    traj = Trajectory(answers=[reply], seed=seed)
    return await suite.score(task, traj, s, ScoreContext(blobs=suite.blobs, services=services or {}))


def shown_text(suite: Suite, task: Task, seed: int, s: Setting) -> str:
    msg = suite.user_message(task, 0, s, Trajectory(seed=seed))
    assert msg["content"][0]["type"] == "image"
    return str(msg["content"][-1]["text"])


# --- V* -----------------------------------------------------------------------------------------------------

async def test_vstar_always_a_scores_100_under_reference_and_chance_under_fixed(tmp_path: Path,
                                                                               blobs: BlobStore) -> None:
    suite = make_suite("vstar", {"path": str(rel.vstar_folder(tmp_path / "vstar"))}, blobs)
    tasks = tasks_of(suite)
    assert [t.id for t in tasks] == ["direct_attributes/sa_1000", "direct_attributes/sa_1001",
                                     "relative_position/sa_2000"]
    ref, fixed = setting(suite, "reference"), setting(suite, "fixed")
    ref_scores, fixed_scores = [], []
    for seed in range(6):
        for t in tasks:
            assert "A. " + t.metadata["options"][0] in shown_text(suite, t, seed, ref)  # folder order: gold is A
            ref_scores.append((await score(suite, t, "A", seed, ref)).value)
            s = await score(suite, t, "A", seed, fixed)
            fixed_scores.append(s.value)
            order = s.details["option_order"]
            assert s.details["shuffled"] and sorted(order) == list(range(len(t.metadata["options"])))
            assert f"A. {t.metadata['options'][order[0]]}" in shown_text(suite, t, seed, fixed)
            again = await score(suite, t, "<answer>A</answer>", seed, fixed)
            assert again.details["option_order"] == order  # deterministic per seed
    assert ref_scores == [1.0] * len(ref_scores)
    assert 0.0 < sum(v or 0 for v in fixed_scores) / len(fixed_scores) < 0.8


async def test_vstar_reference_scorers_read_tags_as_no_answer(tmp_path: Path, blobs: BlobStore) -> None:
    path = str(rel.vstar_folder(tmp_path / "vstar"))
    for scorer in ("vlmevalkit", "lmms-eval"):
        suite = make_suite("vstar", {"path": path, "scorer": scorer, "fidelity": "reference"}, blobs)
        task = tasks_of(suite)[0]
        s = await score(suite, task, "<think>the glove looks dark</think><answer>A</answer>", 0,
                        setting(suite, "reference"))
        assert s.details["scores"] == {"reference": 0.0, "fixed": 1.0}
        assert s.value == 0.0
    lmms = make_suite("vstar", {"path": path, "scorer": "lmms-eval", "fidelity": "reference"}, blobs)
    task = tasks_of(lmms)[0]
    s = await score(lmms, task, "Based on the picture it is black", 0, setting(lmms, "reference"))
    assert s.details["reference"]["letter"] == "B" and s.details["scores"]["fixed"] == 0.0


def test_vstar_tsv_form_reuses_an_image_by_index(tmp_path: Path, blobs: BlobStore) -> None:
    suite = make_suite("vstar", {"path": str(rel.vstar_tsv(tmp_path / "VStarBench.tsv"))}, blobs)
    a, b = tasks_of(suite)
    assert (a.id, a.metadata["answer_index"], b.metadata["answer_index"]) == ("0", 1, 0)
    assert a.turns[0].images == b.turns[0].images


def test_vstar_bad_annotation_is_a_load_error(tmp_path: Path, blobs: BlobStore) -> None:
    root = rel.vstar_folder(tmp_path / "vstar")
    (root / "direct_attributes" / "sa_9.json").write_text(json.dumps({"question": "q?", "options": "nope"}))
    items = list(make_suite("vstar", {"path": str(root)}, blobs).load())
    errors = [i for i in items if isinstance(i, LoadError)]
    assert len(errors) == 1 and "options" in errors[0].message and len(items) == 4


# --- HR-Bench -----------------------------------------------------------------------------------------------

async def test_hrbench_cycle_average_beside_circular(tmp_path: Path, blobs: BlobStore) -> None:
    path = rel.write_parquet(tmp_path / "hr_bench_8k.parquet", rel.hrbench_rows())
    suite = make_suite("hrbench", {"path": str(tmp_path), "version": "8k", "fidelity": "reference"}, blobs)
    tasks = tasks_of(suite)
    assert len(tasks) == 8 and path.exists()
    assert len({t.metadata["question_group"] for t in tasks}) == 2
    ref = setting(suite, "reference")
    records = []
    for t in tasks:
        gold = "ABCD"[t.metadata["answer_index"]]
        wrong = t.id == "0"  # the first rotation of question 1 is answered wrongly
        reply = f"**{'D' if gold != 'D' and wrong else ('A' if wrong else gold)}**"
        s = await score(suite, t, reply, 0, ref)
        assert s.details["option_order"] == [0, 1, 2, 3]  # rotations are never reshuffled
        records.append({"task_id": t.id, "seed": 0, "status": "ok", "score": s.value, "score_details": s.details,
                        "metadata": {k: v for k, v in t.metadata.items() if isinstance(v, str)}})
    table = type(suite).aggregate(records)
    assert table is not None
    assert table["reference_average"] == table["average"]["all"]["reference"] == pytest.approx(7 / 8)
    assert table["average"]["single"]["reference"] == pytest.approx(3 / 4)
    assert table["reference_circular"] == pytest.approx(1 / 2)
    assert table["circular"]["cross"]["reference"] == pytest.approx(1.0)
    assert table["by_cycle"]["cycle1"]["reference"] == pytest.approx(1 / 2)
    assert table["per_seed"]["reference"]["0"] == pytest.approx(7 / 8)


def test_hrbench_tsv_and_missing_file(tmp_path: Path, blobs: BlobStore) -> None:
    rel.write_tsv(tmp_path / "hr_bench_4k.tsv", rel.hrbench_rows())
    assert len(tasks_of(make_suite("hrbench", {"path": str(tmp_path)}, blobs))) == 8
    with pytest.raises(FileNotFoundError, match="hr_bench_8k"):
        list(make_suite("hrbench", {"path": str(tmp_path), "version": "8k"}, blobs).load())


# --- MME-RealWorld ------------------------------------------------------------------------------------------

async def test_mme_empty_output_is_a_under_official_and_no_answer_under_fixed(tmp_path: Path,
                                                                             blobs: BlobStore) -> None:
    root = rel.mme_path_form(tmp_path / "mme")
    suite = make_suite("mme-realworld", {"path": str(root), "fidelity": "reference"}, blobs)
    tasks = {t.id: t for t in tasks_of(suite)}
    car = tasks["Perception/Monitoring/Vehicle/attribute/color/0001"]  # gold A
    assert car.metadata["fine_category"] == "vehicle/attribute"
    s = await score(suite, car, "", 0, setting(suite, "reference"))
    assert s.details["scores"] == {"reference": 1.0, "fixed": 0.0}
    dt = tasks["Perception/Diagram and Table/table/0007"]  # gold C
    s = await score(suite, dt, "Best answer: C", 0, setting(suite, "reference"))
    assert s.details["reference"]["letter"] == "B" and s.details["scores"]["fixed"] == 1.0


async def test_mme_fixed_shuffles_four_options_and_keeps_e_last(tmp_path: Path, blobs: BlobStore) -> None:
    suite = make_suite("mme-realworld", {"path": str(rel.mme_path_form(tmp_path / "mme"))}, blobs)
    task = tasks_of(suite)[0]
    fixed = setting(suite, "fixed")
    orders = set()
    for seed in range(6):
        s = await score(suite, task, None, seed, fixed)
        orders.add(tuple(s.details["option_order"]))
        assert s.details["option_order"][-1] == 4 and s.value == 0.0 and s.details["no_response"]
        gold = s.details["gold"]
        right = await score(suite, task, f"<answer>{gold}</answer>", seed, fixed)
        assert right.value == 1.0
    assert len(orders) > 1


async def test_mme_vlmevalkit_scorer_errors_on_empty_and_uppercases_the_tag(tmp_path: Path,
                                                                           blobs: BlobStore) -> None:
    suite = make_suite("mme-realworld", {"path": str(rel.mme_lite_tsv(tmp_path / "mme_realworld_lite.tsv")),
                                         "variant": "lite", "scorer": "vlmevalkit", "fidelity": "reference"}, blobs)
    tasks = tasks_of(suite)
    assert tasks[0].metadata["options"][2] == "456" and tasks[0].metadata["task"] == "Perception"
    ref = setting(suite, "reference")
    empty = await score(suite, tasks[0], "", 0, ref)
    assert empty.value is None and empty.error and "TypeError" in empty.error
    s = await score(suite, tasks[2], "<answer>the answer is b</answer>", 0, ref)  # gold B; "THE" gives E
    assert s.details["reference"]["letter"] == "E" and s.details["scores"] == {"reference": 0.0, "fixed": 1.0}


# --- TreeBench ----------------------------------------------------------------------------------------------

async def test_treebench_letter_and_box_quirks(tmp_path: Path, blobs: BlobStore) -> None:
    suite = make_suite("treebench", {"path": str(rel.treebench_tsv(tmp_path / "TreeBench.tsv")),
                                     "fidelity": "reference"}, blobs)
    cup, chair = tasks_of(suite)
    assert (cup.metadata["width"], cup.metadata["height"], cup.metadata["targets"]) == (200, 100, [[40, 30, 80, 70]])
    ref = setting(suite, "reference")
    exact = "<think>the cup <box>[40,30,80,70]</box> is glossy</think><answer>D</answer>"
    s = await score(suite, cup, exact, 0, ref)
    assert s.details["scores"] == {"reference": 1.0, "fixed": 1.0}
    assert s.details["iou"] == {"reference": 1.0, "fixed": 1.0}
    spaced = "<think>the cup <box>[40, 30, 80, 70]</box></think><answer>\\boxed{D}</answer>"
    s = await score(suite, cup, spaced, 0, ref)
    assert s.details["iou"] == {"reference": 0.0, "fixed": 1.0}  # spaces drop the box in the reference
    assert s.details["reference"]["letter"] == "B" and s.details["scores"]["fixed"] == 1.0  # \BOXED -> B
    normed = make_suite("treebench", {"path": str(tmp_path / "TreeBench.tsv"), "box_convention": "norm1000"}, blobs)
    s = await score(normed, tasks_of(normed)[0], "<box>[200, 300, 400, 700]</box><answer>D</answer>", 0,
                    setting(normed, "fixed"))
    assert s.details["iou"]["fixed"] == pytest.approx(1.0)
    s = await score(suite, chair, "<think><box>[1,1,5,5]</box></think><answer>B</answer>", 0, ref)
    assert s.details["iou"] == {"reference": 1.0, "fixed": None}  # no targets: True in VLMEvalKit
    treevgr = make_suite("treebench", {"path": str(tmp_path / "TreeBench.tsv"), "scorer": "treevgr",
                                       "fidelity": "reference"}, blobs)
    s = await score(treevgr, tasks_of(treevgr)[0], "<answer>(D)</answer>", 0, setting(treevgr, "reference"))
    assert s.details["scores"] == {"reference": 0.0, "fixed": 1.0}


# --- VisualProbe --------------------------------------------------------------------------------------------

def test_visualprobe_loads_levels_and_image_paths(tmp_path: Path, blobs: BlobStore) -> None:
    root = rel.visualprobe_release(tmp_path / "vp")
    suite = make_suite("visualprobe", {"path": str(root), "level": "hard"}, blobs)
    tasks = tasks_of(suite)
    assert [t.id for t in tasks] == ["visual_probe_hard/123", "visual_probe_hard/124"]
    assert tasks[0].turns[0].text.startswith("What is the license plate") and "<image>" not in tasks[0].turns[0].text
    assert tasks_of(make_suite("visualprobe", {"path": str(root), "level": "easy"}, blobs)) == []


async def test_reference_prompt_asks_for_no_tag_and_strip_answer_tag_reads_deepeyesv2_predictions(
        tmp_path: Path, blobs: BlobStore) -> None:
    path = str(rel.vstar_folder(tmp_path / "vstar"))
    raw = make_suite("vstar", {"path": path, "fidelity": "reference"}, blobs)
    task = tasks_of(raw)[0]
    assert "<answer>" not in shown_text(raw, task, 0, setting(raw, "reference"))
    assert "<answer>" in shown_text(raw, task, 0, setting(raw, "fixed"))
    reply = "<think>dark</think><answer>A</answer>"
    assert (await score(raw, task, reply, 0, setting(raw, "reference"))).value == 0.0
    stripped = make_suite("vstar", {"path": path, "fidelity": "reference", "strip_answer_tag": True}, blobs)
    assert (await score(stripped, task, reply, 0, setting(stripped, "reference"))).value == 1.0


def test_vstar_test_questions_jsonl_form(tmp_path: Path, blobs: BlobStore) -> None:
    root = rel.vstar_folder(tmp_path / "vstar")
    lines = [{"question_id": 0, "image": "direct_attributes/sa_1000.jpg", "category": "direct_attributes",
              "label": "B", "text": "What is the color of the glove?\n(A) purple\n(B) black\n(C) white\n(D) red\n"
                                    "Answer with the option's letter from the given choices directly."},
             {"question_id": 1, "image": "../outside.jpg", "category": "direct_attributes", "label": "A",
              "text": "Q?\n(A) x\n(B) y"}]
    (root / "test_questions.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    items = list(make_suite("vstar", {"path": str(root / "test_questions.jsonl")}, blobs).load())
    task, bad = items
    assert isinstance(task, Task) and isinstance(bad, LoadError)
    assert task.metadata["options"] == ["purple", "black", "white", "red"] and task.metadata["answer_index"] == 1
    assert task.turns[0].text == "What is the color of the glove?"


def test_reference_prompt_is_vlmevalkits_layout_read_from_the_checkout(tmp_path: Path, blobs: BlobStore) -> None:
    path = str(rel.vstar_folder(tmp_path / "vstar"))
    suite = make_suite("vstar", {"path": path, "fidelity": "reference"}, blobs)
    task = tasks_of(suite)[0]
    text = shown_text(suite, task, 0, setting(suite, "reference"))
    # the fixture's image_mcq.py builds the prompt with +=: question, options "A) …", instruction
    assert text == ("SYNTH-Question: What is the color of the glove?\nSYNTH-Options:\nA) black\nB) purple\n"
                    "C) white\nD) red\nSYNTH-MCQ pick one option. \n")
    manifest = suite.text_manifest()
    assert manifest is not None and {t["symbol"] for t in manifest["texts"]} >= {
        "ImageMCQDataset.build_prompt.prompt+@1", "ImageMCQDataset.build_prompt.options_prompt+@0"}
    own = make_suite("vstar", {"path": path, "fidelity": "reference", "texts": "own"}, blobs)
    assert shown_text(own, task, 0, setting(own, "reference")).startswith("Question: What is the color")
    lmms = make_suite("vstar", {"path": path, "fidelity": "reference", "scorer": "lmms-eval"}, blobs)
    lmms_manifest = lmms.text_manifest()  # lmms-eval's layout is not VLMEvalKit's: its task YAML's parts
    assert lmms_manifest is not None and {t["file"] for t in lmms_manifest["texts"]} == {
        "lmms_eval/tasks/vstar_bench/_default_template_yaml"}


def test_treebench_reference_prompt_is_its_own_vlmevalkit_class(tmp_path: Path, blobs: BlobStore) -> None:
    path = str(rel.treebench_tsv(tmp_path / "TreeBench.tsv"))
    suite = make_suite("treebench", {"path": path, "fidelity": "reference"}, blobs)
    task = tasks_of(suite)[0]
    assert shown_text(suite, task, 0, setting(suite, "reference")).endswith("D) ceramic\nSYNTH-TREE letter only. \n")
    fixed = make_suite("treebench", {"path": path}, blobs)
    assert "<box>[x1,y1,x2,y2]</box>" in shown_text(fixed, task, 0, setting(fixed, "fixed"))


def test_treevgr_reference_prompt_and_system_from_the_checkout(tmp_path: Path, blobs: BlobStore) -> None:
    path = str(rel.treebench_tsv(tmp_path / "TreeBench.tsv"))
    suite = make_suite("treebench", {"path": path, "fidelity": "reference", "scorer": "treevgr"}, blobs)
    task = tasks_of(suite)[0]
    s = setting(suite, "reference")
    assert suite.system_prompt(task, s, []) == "SYNTH-TREEVGR system."
    assert shown_text(suite, task, 0, s) == ("What is the material of the cup on the left table? SYNTH-Opts:\n"
                                             "A. glass\nB. paper\nC. steel\nD. ceramic\nSYNTH-TREEVGR answer in tags.")
    assert suite.system_prompt(task, setting(suite, "fixed"), []) is None


def test_mme_reference_prompt_reads_sys_and_the_choices_header(tmp_path: Path, blobs: BlobStore) -> None:
    suite = make_suite("mme-realworld", {"path": str(rel.mme_path_form(tmp_path / "mme")), "fidelity": "reference"},
                       blobs)
    task = tasks_of(suite)[0]
    assert shown_text(suite, task, 0, setting(suite, "reference")) == (
        "What is the data of Interest in Feb-23 in the table? SYNTH choices:\n(A) 458\n(B) 457\n(C) 456\n(D) 455\n"
        "(E) This image doesn't feature the data.\nSYNTH-MME pick A-E. \nSYNTH best:")
