"""The harnesses' own text tool protocols, end to end: DeepEyes' ``<tool_call>`` on V*, Mini-o3's
``<grounding>`` on VisualProbe and V*, and lmms-eval's V* prompt layout.

Sweeps run through ``fasteval run`` with a ``sequence`` sim (one scripted reply per assistant
turn), texts from synthetic checkouts in tmp, and real PNG images whose regions have known grey
levels, so each crop is checked pixel by pixel: on the right image, at the right coordinates.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import pyvips
import releases as rel
import yaml
from protocol_checkouts import (
    DE_FEEDBACK,
    DE_SYSTEM_MARK,
    MO_SYSTEM_MARK,
    deepeyes_checkout,
    lmms_eval_checkout,
    mini_o3_checkout,
    regions_png,
)
from reference_repos import FIXTURE_COMMIT

from fasteval.images import ImageError
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import Setting
from fasteval.suites.vstar import VStar
from fasteval.tools.text_protocols import (
    DeepEyesProtocol,
    DeepEyesTexts,
    MiniO3Protocol,
    MiniO3Texts,
    deepeyes_crop,
)

_SUPPORT = Path(__file__).resolve().parents[1] / "e2e" / "e2e_support.py"
_spec = importlib.util.spec_from_file_location("twi_protocol_e2e_support", _SUPPORT)
assert _spec is not None and _spec.loader is not None
support = importlib.util.module_from_spec(_spec)
sys.modules["twi_protocol_e2e_support"] = support
_spec.loader.exec_module(support)

GLOVE_ZOOM = '<think>the glove is small</think><tool_call>{"name": "image_zoom_in_tool", ' \
             '"arguments": {"bbox_2d": [140, 20, 180, 60], "label": "glove"}}</tool_call>'
BROKEN_CALL = '<think>zoom</think><tool_call>{"name": "image_zoom_in_tool", "arguments": {bbox_2d: [1, 2</tool_call>'


def _pixels(run_dir: Path, ref: str) -> np.ndarray[Any, Any]:
    img = pyvips.Image.new_from_file(str(run_dir / "blobs" / ref[:2] / ref))
    return np.ndarray(buffer=img.write_to_memory(), dtype=np.uint8, shape=(img.height, img.width, img.bands))


def _vstar_release(root: Path) -> Path:
    """Three V* questions over the regions image (PNG, so grey levels survive exactly)."""
    for category, stem, question, options in rel.VSTAR_ITEMS:
        (root / category).mkdir(parents=True, exist_ok=True)
        (root / category / f"{stem}.png").write_bytes(regions_png())
        (root / category / f"{stem}.json").write_text(json.dumps(
            {"target_object": ["x"], "bbox": [[140, 20, 40, 40]], "question": question, "options": options}))
    return root


def _user_texts(message: dict[str, Any]) -> list[str]:
    return [p["text"] for p in message["content"] if p["type"] == "text"]


# --- parsing: unit level ------------------------------------------------------------------------------------


def test_deepeyes_parse_reads_json_or_python_literals_and_rejects_junk_with_a_bounded_reason() -> None:
    proto = DeepEyesProtocol("reference", DeepEyesTexts(system="s", feedback="f"))
    ok = proto.parse(GLOVE_ZOOM)
    assert [json.loads(c.arguments) for c in ok.calls] == [{"bbox_2d": [140, 20, 180, 60], "label": "glove"}]
    literal = proto.parse("<tool_call>{'name': 'x', 'arguments': {'bbox_2d': (1, 2, 3, 4)}}")  # no closing tag
    assert json.loads(literal.calls[0].arguments) == {"bbox_2d": [1, 2, 3, 4]}
    assert proto.parse("<tool_call>{}</tool_call> then <answer>A</answer>").calls == []  # </answer> ends it
    assert proto.parse("I think it is A").calls == []
    broken = proto.parse(BROKEN_CALL)
    assert not broken.calls and broken.rejected and "could not read" in broken.rejected
    junk = proto.parse("<tool_call>" + "[" * 50_000 + "</tool_call>")
    assert junk.rejected is not None and len(junk.rejected) < 700 and len(junk.raw_call) < 700
    nested = proto.parse("<tool_call>" + "(" * 5000 + "</tool_call>")  # literal_eval would recurse away
    assert nested.rejected is not None
    assert proto.parse('<tool_call>{"arguments": {"bbox_2d": [1, 2, 3]}}</tool_call>').rejected
    quoted = '<tool_call>{"name": "z", "arguments": "{\\"bbox_2d\\": [1, 2, 3, 4]}"}</tool_call>'
    assert proto.parse(quoted).rejected  # DeepEyes indexes the string: an error
    fixed = DeepEyesProtocol("fixed", DeepEyesTexts(system="s", feedback="f"))
    assert json.loads(fixed.parse(quoted).calls[0].arguments) == {"bbox_2d": [1, 2, 3, 4]}


def test_mini_o3_parse_stops_at_the_first_grounding_and_keeps_the_reference_spacing_rule() -> None:
    texts = MiniO3Texts(system="s", observation=lambda a, o: f"{a}/{o}", error=lambda e: e)
    ref, fixed = MiniO3Protocol("reference", texts), MiniO3Protocol("fixed", texts)
    reply = '<think>x</think><grounding>{"bbox_2d": [0.1, 0.2, 0.3, 0.4], "source": "observation_1"}</grounding> more'
    parsed = ref.parse(reply)
    assert parsed.content.endswith("</grounding>")  # generation stops there in the harness
    assert json.loads(parsed.calls[0].arguments) == {"bbox_2d": [0.1, 0.2, 0.3, 0.4], "source": "observation_1"}
    tight = '<grounding>{"bbox_2d":[0.1,0.2,0.3,0.4],"source":"original_image"}</grounding>'
    assert ref.parse(tight).rejected and not ref.parse(tight).calls  # their regex wants '{"bbox_2d": '
    assert json.loads(fixed.parse(tight).calls[0].arguments)["source"] == "original_image"
    assert ref.parse("<answer>KL 4471</answer>").calls == []


def _decoded(data: bytes) -> np.ndarray[Any, Any]:
    img = pyvips.Image.new_from_buffer(data, "")
    return np.ndarray(buffer=img.write_to_memory(), dtype=np.uint8, shape=(img.height, img.width, img.bands))


def test_deepeyes_crop_pads_black_outside_the_image_as_pil_does_and_fixed_clamps() -> None:
    original = regions_png()  # 200x100: grey 30 left of x=100, 200 right of it
    data, w, h = deepeyes_crop(original, [-28, 0, 28, 56], clamp=False)  # half of it left of the image
    pixels = _decoded(data)
    assert (w, h) == (56, 56) and pixels[:, :24].max() == 0 and pixels[:, 32:].min() == 30
    data, w, h = deepeyes_crop(original, [-28, 0, 28, 56], clamp=True)  # ours: only the part inside
    assert _decoded(data).min() == 30 and (w, h) == (56, 84)  # the 28x56 px inside, enlarged
    data, w, h = deepeyes_crop(original, [84.4, 0, 112.4, 28], clamp=False)  # PIL rounds: x 84..112
    assert (w, h) == (56, 56)  # 28x28 px, lifted by smart_resize to 4*28*28 pixels
    edge = _decoded(data)
    assert edge[:, 0].max() == 30 and edge[:, -1].min() == 200
    with pytest.raises(ImageError, match="less than"):
        deepeyes_crop(original, [50, 10, 40, 20], clamp=False)
    with pytest.raises(ImageError):
        deepeyes_crop(original, [250, 10, 300, 20], clamp=True)  # nothing of it inside


# --- V* under DeepEyes' protocol ----------------------------------------------------------------------------


def _deepeyes_config(tmp_path: Path) -> Path:
    model = {"name": "sim-eyes", "provider": "sim", "policy": "sequence", "default_reply": "<answer>A</answer>",
             "script": [{"match": "glove", "replies": [GLOVE_ZOOM, "<think>black</think><answer>A</answer>"]},
                        {"match": "material", "replies": [BROKEN_CALL, "<answer>B</answer>"]}]}
    settings = [{"name": "deepeyes-ref", "extends": "zoom", "tools": [], "fidelity": "reference",
                 "options": {"protocol": "deepeyes-text"}},
                {"name": "deepeyes-fixed", "extends": "zoom", "tools": [], "fidelity": "fixed",
                 "options": {"protocol": "deepeyes-text"}},
                {"name": "grounding", "extends": "zoom", "tools": [], "max_rounds": 12,
                 "options": {"protocol": "mini-o3-grounding"}}]
    return support.write_config(tmp_path, {
        "name": "twi-deepeyes-protocol", "seeds": 1, "models": [model],
        "suites": [{"name": "vstar", "options": {
            "path": str(_vstar_release(tmp_path / "vstar")), "fidelity": "reference",
            "deepeyes_repo": str(deepeyes_checkout(tmp_path / "DeepEyes")),
            "mini_o3_repo": str(mini_o3_checkout(tmp_path / "Mini-o3"))}, "settings": settings}]})


def test_vstar_sweep_under_deepeyes_text_crops_the_original_and_feeds_it_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, run_dir = _deepeyes_config(tmp_path), tmp_path / "run"
    code, _, err = support.cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code == 0, err
    assert support.run_summary(err) == (9, 0, 0, 9)
    recs = {(r["setting"], r["task_id"]): r for r in support.latest(run_dir)}

    glove = recs[("deepeyes-ref", "direct_attributes/sa_1000")]
    msgs = glove["trajectory"]["messages"]
    assert msgs[0]["role"] == "system" and msgs[0]["content"].startswith(DE_SYSTEM_MARK)
    opening = _user_texts(msgs[1])[0]  # DeepEyes' layout, options in folder order (the gold is A)
    assert opening == ("SYNTH-Q: What is the color of the glove?\nSYNTH-OPTS: \nA. black\nB. purple\nC. white\n"
                       "D. red\n\n" + DE_FEEDBACK)
    call = glove["trajectory"]["tool_calls"][0]
    assert (call["name"], call["status"], call["args"]["bbox_2d"]) == ("image_zoom_in_tool", "ok", [140, 20, 180, 60])
    feedback = msgs[3]
    assert feedback["role"] == "user" and [p["type"] for p in feedback["content"]] == ["text", "image", "text", "text"]
    assert _user_texts(feedback) == ["<tool_response>", DE_FEEDBACK, "</tool_response>"]
    crop = _pixels(run_dir, feedback["content"][1]["image"])
    assert crop.shape[:2] == (56, 56)  # 40x40 px of the original, smart_resize up to 4*28*28 pixels
    assert np.median(crop) == 90 and crop.min() >= 85  # all of it inside the grey-90 block
    assert glove["score"] == 1.0 and glove["termination"] == "answered"

    broken = recs[("deepeyes-ref", "direct_attributes/sa_1001")]  # their eval raises: the episode ends there
    bad = broken["trajectory"]["tool_calls"][0]
    assert bad["status"] == "error" and "could not read" in bad["error"] and "bbox_2d" in bad["args"]["text"]
    assert broken["rounds"] == 1 and broken["answer"] == BROKEN_CALL
    assert "deepeyes-text" in broken["trajectory"]["termination_reason"]
    fixed = recs[("deepeyes-fixed", "direct_attributes/sa_1001")]  # fixed: the model reads the error, goes on
    assert fixed["rounds"] == 2 and fixed["trajectory"]["tool_calls"][0]["status"] == "error"
    error_turn = fixed["trajectory"]["messages"][3]
    assert any(t.startswith("Error: could not read") for t in _user_texts(error_turn))
    assert fixed["score_details"]["shuffled"] is True
    manifest = json.loads((run_dir / "manifest.json").read_text())["texts"]["vstar"]["texts"]
    where = {t["file"]: (t.get("reference_repo"), t.get("reference_commit")) for t in manifest}
    assert where["eval/eval_vstar.py"] == (str(tmp_path / "DeepEyes"), FIXTURE_COMMIT)
    assert where["verl/trainer/constants.py"] == (str(tmp_path / "Mini-o3"), FIXTURE_COMMIT)
    support.resume_and_rescore(capsys, config, run_dir, list(support.latest(run_dir)), expect_judged=False)


def test_vstar_under_mini_o3_grounding_sends_its_system_prompt_and_the_question(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, run_dir = _deepeyes_config(tmp_path), tmp_path / "run"
    code, _, err = support.cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress",
                               "--setting", "grounding")
    assert code == 0, err
    for r in support.latest(run_dir):
        msgs = r["trajectory"]["messages"]
        assert msgs[0]["content"].startswith(MO_SYSTEM_MARK) and "Options:" in _user_texts(msgs[1])[0]
        assert r["status"] == "ok" and r["trajectory"]["tool_calls"] == []  # the script writes no <grounding>


def test_a_missing_protocol_checkout_stops_the_sweep_before_any_job(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = support.write_config(tmp_path, {
        "name": "twi-missing", "seeds": 1, "models": [{"name": "m", "provider": "sim", "policy": "direct"}],
        "suites": [{"name": "vstar", "options": {"path": str(_vstar_release(tmp_path / "vstar")),
                                                 "deepeyes_repo": str(tmp_path / "nowhere")},
                    "settings": [{"name": "z", "extends": "zoom", "options": {"protocol": "deepeyes-text"}}]}]})
    code, _, err = support.cli(capsys, "run", str(config), "--run-dir", str(tmp_path / "run"), "--no-progress")
    assert code == 2 and "nowhere" in err and "deepeyes-reference" in err
    assert not (tmp_path / "run" / "records.jsonl").exists()


# --- VisualProbe under Mini-o3's protocol ---------------------------------------------------------------------


def _visualprobe_config(tmp_path: Path) -> Path:
    rows = [dict(r, images=[r["images"][0].replace(".jpg", ".png")]) for r in rel.VP_ROWS]
    root = tmp_path / "vp"
    (root / "VisualProbe_Hard" / "data").mkdir(parents=True)
    for row in rows:
        (root / row["images"][0]).write_bytes(regions_png())
    (root / "VisualProbe_Hard" / "val.json").write_text(json.dumps(rows))
    plate = ['<think>right half</think><grounding>{"bbox_2d": [0.5, 0.0, 1.0, 1.0], "source": "original_image"}'
             '</grounding> and this is cut off',
             '<think>closer</think><grounding>{"bbox_2d": [0.4, 0.2, 0.8, 0.6], "source": "observation_1"}</grounding>',
             "<think>read it</think><answer>KL 4471</answer>"]
    flag = ['<grounding>{"bbox_2d": oops}</grounding>',
            '<grounding>{"bbox_2d": [0.0, 0.0, 0.5, 1.0], "source": "original_image"}</grounding>',
            "<answer>OPEN</answer>"]
    model = {"name": "sim-o3", "provider": "sim", "policy": "sequence", "default_reply": "<answer>?</answer>",
             "script": [{"match": "license plate", "replies": plate}, {"match": "red flag", "replies": flag}]}
    judge = {"provider": "sim", "policy": "scripted", "default_reply": "Score: 0",
             "script": [{"match": "PRED=KL 4471", "reply": "Score: 1"}, {"match": "PRED=OPEN", "reply": "Score: 1"}]}
    settings = [{"name": "grounding-ref", "extends": "zoom", "tools": [], "fidelity": "reference",
                 "options": {"protocol": "mini-o3-grounding"}},
                {"name": "grounding-fixed", "extends": "zoom", "tools": [], "fidelity": "fixed",
                 "options": {"protocol": "mini-o3-grounding"}}]
    return support.write_config(tmp_path, {
        "name": "twi-grounding", "seeds": 1, "models": [model], "roles": {"judge": judge},
        "suites": [{"name": "visualprobe", "options": {
            "path": str(root), "fidelity": "reference", "reference_repo": str(mini_o3_checkout(tmp_path / "Mini-o3"))},
            "settings": settings}]})


def test_visualprobe_sweep_under_mini_o3_grounding_crops_observations_at_full_resolution(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, run_dir = _visualprobe_config(tmp_path), tmp_path / "run"
    code, _, err = support.cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code == 0, err
    assert support.run_summary(err) == (4, 0, 0, 4)
    recs = {(r["setting"], r["task_id"]): r for r in support.latest(run_dir)}

    plate = recs[("grounding-ref", "visual_probe_hard/123")]
    msgs = plate["trajectory"]["messages"]
    assert msgs[0]["content"].startswith(MO_SYSTEM_MARK)
    assert [p["type"] for p in msgs[1]["content"]] == ["image", "text"]
    assert _user_texts(msgs[1]) == ["What is the license plate of the white van behind the bus?"]
    assert msgs[2]["content"].endswith("</grounding>")  # "and this is cut off" never reached the history
    first, second = plate["trajectory"]["tool_calls"]
    # observation_1: the right half of the 200x100 original, the harness's int() and w-1 / h-1 clamp
    assert (first["status"], first["name"]) == ("ok", "grounding")
    obs1 = _pixels(run_dir, first["images"][0])
    assert obs1.shape[:2] == (99, 99) and obs1[0, 0, 0] == 200 and obs1[30, 50, 0] == 90
    assert first["extra"]["observation"] == first["images"][0]  # big enough: shown as stored
    # observation_2 is cut from observation_1 (not the original): original x 139..178, y 19..58
    assert second["status"] == "ok", second["error"]
    assert second["extra"]["source"] == 1 and second["extra"]["box"] == [39, 19, 79, 59]
    raw2 = _pixels(run_dir, second["extra"]["observation"])
    assert raw2.shape[:2] == (40, 40) and raw2[1:, 1:].max() == 90 and raw2[0, 5, 0] == 200
    shown2 = _pixels(run_dir, second["images"][0])
    assert shown2.shape[:2] == (56, 56)  # under 3,136 pixels: enlarged (nearest) for the model only
    feedback = msgs[3]
    assert [p["type"] for p in feedback["content"]] == ["text", "image", "text"]
    assert _user_texts(feedback)[0] == "SYNTH-OBS act=0 obs=1:\n"
    assert plate["score"] == 1.0 and plate["answer"].endswith("<answer>KL 4471</answer>")

    flag_ref = recs[("grounding-ref", "visual_probe_hard/124")]
    bad, good = flag_ref["trajectory"]["tool_calls"]
    assert bad["status"] == "error" and good["status"] == "ok"
    error_turn = flag_ref["trajectory"]["messages"][3]
    assert _user_texts(error_turn)[0].startswith("SYNTH-ERR (could not read the grounding")
    assert _user_texts(error_turn)[0].endswith("SYNTH-ERR-HINT fix it.")
    # the harness labels by round: the first successful crop is announced as "Observation 2" ...
    assert _user_texts(flag_ref["trajectory"]["messages"][5])[0] == "SYNTH-OBS act=1 obs=2:\n"
    flag_fixed = recs[("grounding-fixed", "visual_probe_hard/124")]
    # ... while under fixed it is the index the model can zoom into next
    assert _user_texts(flag_fixed["trajectory"]["messages"][5])[0] == "SYNTH-OBS act=1 obs=1:\n"
    left = _pixels(run_dir, good["images"][0])
    assert left.shape[:2] == (99, 100) and set(np.unique(left)) == {30}
    support.resume_and_rescore(capsys, config, run_dir, list(support.latest(run_dir)))


# --- lmms-eval's V* prompt layout -----------------------------------------------------------------------------


def _vstar_jsonl(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "direct_attributes").mkdir()
    (root / "direct_attributes" / "sa_1.png").write_bytes(regions_png())
    text = "What is the color of the glove?\n(A) purple\n(B) black\n(C) white\n(D) red\nAnswer with the letter."
    row = {"question_id": 0, "image": "direct_attributes/sa_1.png", "category": "direct_attributes", "label": "B",
           "text": text}
    path = root / "test_questions.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return path


def test_lmms_eval_layout_is_read_from_the_task_yaml_despite_function_tags(tmp_path: Path) -> None:
    repo = lmms_eval_checkout(tmp_path / "lmms-eval")
    with pytest.raises(yaml.constructor.ConstructorError):  # a plain safe load refuses their files
        yaml.safe_load((repo / "lmms_eval/tasks/vstar_bench/_default_template_yaml").read_text())
    blobs = BlobStore(tmp_path / "blobs")
    options = {"path": str(_vstar_jsonl(tmp_path / "vstar")), "fidelity": "reference", "scorer": "lmms-eval",
               "reference_repo": str(repo)}
    suite = VStar(options, blobs)
    task = next(t for t in suite.load() if not hasattr(t, "message"))
    direct = Setting(name="direct", tools=[], max_rounds=1, fidelity="reference")
    from fasteval.core.types import Trajectory

    text = suite.user_message(task, 0, direct, Trajectory())["content"][-1]["text"]
    # their doc_to_text: question, "A. opt" lines, the row's trailing instruction swallowed by the last option
    assert text == ("SYNTH-PRE What is the color of the glove?\nA. purple\nB. black\nC. white\n"
                    "D. red\nAnswer with the letter.\nSYNTH-LMMS letter only.")
    assert suite.request_params(direct, "m") == {"max_tokens": 10240}  # our budget: never their 16
    capped = VStar({**options, "generation": "lmms-eval"}, blobs)
    assert capped.request_params(direct, "m") == {"max_tokens": 16, "temperature": 0.0, "top_p": 1.0}
    manifest = suite.text_manifest()
    assert manifest is not None and {t["file"] for t in manifest["texts"]} == {
        "lmms_eval/tasks/vstar_bench/_default_template_yaml"}
    with pytest.raises(ValueError, match="scorer lmms-eval"):
        VStar({**options, "scorer": "vlmevalkit", "generation": "lmms-eval"}, blobs)
    with pytest.raises(ValueError, match="texts: own"):
        VStar({**options, "texts": "own", "generation": "lmms-eval"}, blobs)
    own = VStar({**options, "texts": "own"}, blobs)
    assert own.user_message(task, 0, direct, Trajectory())["content"][-1]["text"].endswith(
        "D. red\nAnswer with the letter.\nReply with the letter of the right option only.")
