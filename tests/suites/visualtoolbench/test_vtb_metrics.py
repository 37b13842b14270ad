"""ARS/APR, the paper's tables and the tool metrics, against hand-computed values."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fasteval.suites.visualtoolbench import aggregate, classify_image_ops, rubric_score


def test_rubric_score_pools_turns_and_fails_on_heavy_rubrics_only() -> None:
    s = rubric_score([[(5, True), (2, False)], [(4, True), (3, False), (1, True)]])
    assert s["ars"] == pytest.approx(10 / 15) and s["apr"] == 1.0
    assert s["turn_ars"] == [pytest.approx(5 / 7), pytest.approx(5 / 8)]
    assert rubric_score([[(5, True)], [(4, False)]])["apr"] == 0.0
    # A verdict that is neither Met nor Not Met earns nothing but does not fail APR (reference quirk).
    odd = rubric_score([[(5, None), (1, True)]])
    assert (odd["ars"], odd["apr"]) == (pytest.approx(1 / 6), 1.0)


def _call(name: str, status: str, code: str | None = None, as_text: bool = False) -> dict[str, Any]:
    args: Any = {"code": code} if code is not None else {"query": "q"}
    return {"id": "c", "name": name, "args": json.dumps(args) if as_text else args, "status": status}


def _record(task: str, category: str, focus: str, turncase: str, ars: float | None, apr: float | None,
            calls: list[dict[str, Any]], seed: int = 0) -> dict[str, Any]:
    ok = ars is not None
    return {
        "task_id": task, "seed": seed, "status": "ok" if ok else "error", "score": apr,
        "score_details": {"ars": ars, "apr": apr} if ok else {},
        "metadata": {"prompt_category": category, "eval_focus": focus, "turncase": turncase},
        "trajectory": {"tool_calls": calls},
    }


CROP = "from PIL import Image\nimg = Image.open('input_0.png')\nimg.crop((0, 0, 10, 10)).save('out/transformed_image_0.png')"
ROT_CONTRAST = "img = img.rotate(90)\nimg = ImageEnhance.Contrast(img).enhance(2)"
GRAY = "# crop the region later\nimport cv2\ng = cv2.cvtColor(a, cv2.COLOR_BGR2GRAY)"

RECORDS = [
    _record("A", "physics", "region_switch_qa", "single-turn", 0.5, 1.0, [
        _call("python_image_processing", "ok", CROP),
        _call("python_image_processing", "error", ROT_CONTRAST),
        _call("calculator", "ok")]),
    _record("B", "chemistry", "hybrid_tool_reasoning", "single-turn", 0.25, 0.0, []),
    _record("C", "finance", "temporal_reasoning", "multi-turn", 1.0, 1.0, [
        _call("web_search", "ok"), _call("python_image_processing", "ok", GRAY, as_text=True)]),
    _record("D", "finance", "temporal_reasoning", "multi-turn", None, None, [_call("calculator", "error")]),
]


def test_tables_merge_stem_and_count_errors_beside_means() -> None:
    out = aggregate(RECORDS)
    overall = out["overall"]
    assert (overall["n"], overall["errors"]) == (3, 1)
    assert overall["apr"] == pytest.approx(2 / 3) and overall["ars"] == pytest.approx(1.75 / 3)
    assert out["by_domain"] == {
        "STEM": {"n": 2, "errors": 0, "apr": 0.5, "ars": pytest.approx(0.375)},
        "finance": {"n": 1, "errors": 1, "apr": 1.0, "ars": 1.0},
    }
    assert out["by_eval_focus"]["temporal_reasoning"] == {"n": 1, "errors": 1, "apr": 1.0, "ars": 1.0}
    assert out["by_eval_focus"]["hybrid_tool_reasoning"]["apr"] == 0.0
    assert out["by_turncase"]["single-turn"]["apr"] == 0.5 and out["by_turncase"]["multi-turn"]["n"] == 1


def test_seed_spread_of_apr() -> None:
    records = [_record("A", "maths", "f", "single-turn", 1.0, 1.0, [], seed=0),
               _record("A", "maths", "f", "single-turn", 0.2, 0.0, [], seed=1)]
    overall = aggregate(records)["overall"]
    assert overall["apr_by_seed"] == [1.0, 0.0] and overall["apr_std"] == 0.5 and overall["apr"] == 0.5


def test_tool_metrics_follow_the_paper_definitions() -> None:
    tools = aggregate(RECORDS)["tools"]
    assert tools["tasks"] == 3
    assert tools["proactivity"] == pytest.approx(2 / 3)
    assert tools["success_rate"] == pytest.approx(4 / 5)
    assert tools["volume"] == pytest.approx(5 / 3)
    assert tools["per_tool"]["python_image_processing"] == {
        "calls": 3, "share": pytest.approx(0.6), "success_rate": pytest.approx(2 / 3), "volume": 1.0}
    assert tools["per_tool"]["calculator"] == {"calls": 1, "share": pytest.approx(0.2), "success_rate": 1.0,
                                               "volume": pytest.approx(1 / 3)}


def test_image_op_distribution_counts_each_operation_of_each_call() -> None:
    ops = aggregate(RECORDS)["image_ops"]
    assert ops["calls"] == 3
    assert ops["counts"] == {"crop": 1, "resize": 0, "rotate": 1, "flip": 0, "brightness": 0,
                             "contrast": 1, "editing": 0, "other": 1}
    assert ops["shares"]["crop"] == 0.25 and sum(ops["shares"].values()) == pytest.approx(1.0)


@pytest.mark.parametrize(("code", "expected"), [
    ("arr = np.array(img)[100:200, 50:150]", {"crop"}),
    ("roi = img[y:y + h, x:x + w]", {"crop"}),
    ("rgb = bgr[..., ::-1]", {"other"}),
    ("red = img[:, :, 0]", {"other"}),
    ("f = np.fliplr(a)", {"flip"}),
    ("m = img.transpose(Image.FLIP_LEFT_RIGHT)", {"flip"}),
    ("m = a[:, ::-1]", {"flip"}),
    ("small = img.resize((w // 2, h // 2), Image.LANCZOS)", {"resize"}),
    ("half = a[::2, ::2]", {"resize"}),
    ("big = cv2.resize(roi, None, fx=3, fy=3)", {"resize"}),
    ("img = cv2.rotate(img, cv2.ROTATE_90_CLOCKWISE)", {"rotate"}),
    ("M = cv2.getRotationMatrix2D(c, 15, 1.0)\nout = cv2.warpAffine(a, M, (w, h))", {"rotate"}),
    ("ImageEnhance.Brightness(img).enhance(1.5)", {"brightness"}),
    ("out = cv2.convertScaleAbs(a, alpha=1.5, beta=20)", {"brightness", "contrast"}),
    ("g = cv2.equalizeHist(g)", {"contrast"}),
    ("c = ImageOps.autocontrast(img)", {"contrast"}),
    ("d = ImageDraw.Draw(img)\nd.rectangle([0, 0, 5, 5], outline='red')", {"editing"}),
    ("cv2.putText(a, 'A', (5, 5), cv2.FONT_HERSHEY_SIMPLEX, 1, (0, 0, 255))", {"editing"}),
    ("img = img.filter(ImageFilter.SHARPEN)", {"other"}),
    ("print(img.size)  # crop and rotate next", {"other"}),
    ("c = img.crop(box).resize((400, 400))\nc = ImageEnhance.Contrast(c).enhance(1.8)", {"crop", "resize", "contrast"}),
])
def test_image_op_classifier(code: str, expected: set[str]) -> None:
    assert classify_image_ops(code) == expected
