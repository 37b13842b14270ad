"""HR-Bench's two judged reference scorers and MME-RealWorld's CN prompt, texts read from synthetic
checkouts of the references (placeholder strings in their layout), judges played by the sim."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import releases as rel
from judge_checkouts import write_hrbench, write_lmms_eval, write_vlmevalkit_cn
from reference_repos import FIXTURE_COMMIT

from fasteval.core.types import Task, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, Setting, make_suite
from fasteval.suites.hrbench.lmms_judge import lmms_texts
from fasteval.suites.hrbench.official_judge import judge_text, official_texts, parse_score
from fasteval.suites.reference_texts import ReferenceTextError

if "twi_e2e_support" not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        "twi_e2e_support", Path(__file__).resolve().parents[1] / "e2e" / "e2e_support.py")
    assert _spec is not None and _spec.loader is not None
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["twi_e2e_support"] = _mod
    _spec.loader.exec_module(_mod)
support = sys.modules["twi_e2e_support"]

# The sign question's options are capitalised, so lmms-eval's in-place lower-casing shows in its judge's text.
QUESTIONS = [("What number is on the bus?", ["21", "112", "121", "12"], 1, "single"),
             ("Which sign is closer to the tree?", ["Stop", "Yield", "Exit", "Bus"], 2, "cross")]


def _tasks(suite: Any) -> list[Task]:
    items = list(suite.load())
    assert not [i for i in items if isinstance(i, LoadError)]
    return [i for i in items if isinstance(i, Task)]


def _shown(suite: Any, task: Task, fidelity: str = "reference") -> str:
    s: Setting = next(s for s in suite.default_settings() if s.name == "direct")
    s.fidelity = fidelity
    return str(suite.user_message(task, 0, s, Trajectory(seed=0))["content"][-1]["text"])


def _hr_release(tmp_path: Path) -> Path:
    rel.write_tsv(tmp_path / "hr" / "hr_bench_4k.tsv", rel.hrbench_rows(questions=QUESTIONS))
    return tmp_path / "hr"


# --- the HR-Bench repository's yes/no judge -----------------------------------------------------------------

def test_official_judge_text_and_yes_no_reading_from_the_checkout(tmp_path: Path) -> None:
    repo = write_hrbench(tmp_path / "HR-Bench")
    book = official_texts({"reference_repo": str(repo)}, "reference")
    text = judge_text(book, "Which sign?", {"A": "stop", "B": "exit"}, "B", "<answer>exit</answer>")
    assert text == ("SYNTH-HR-JUDGE say yes or no. BLOCK<<Q<<Which sign?>>\nOPTS\nA) stop\nB) exit\n"
                    "SYNTH-HR-JUDGE one is right. \n>> GOLD<<B. exit>> PRED<<<answer>exit</answer>>>?")
    assert text.replace("<answer>exit</answer>", "nan") == judge_text(book, "Which sign?", {"A": "stop", "B": "exit"},
                                                                      "B", "")  # an empty cell reads back as NaN
    # ``^(yes|no)`` on the lower-cased reply as it came: no strip, a prefix is enough.
    assert [parse_score(r) for r in ("Yes.", "YES", "yesterday", " yes", "No", "maybe yes", "")] == [
        1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert book.manifest()["reference_commit"] == FIXTURE_COMMIT


def test_official_and_lmms_scorers_name_their_checkout_when_it_is_missing(tmp_path: Path,
                                                                          blobs: BlobStore) -> None:
    path = str(_hr_release(tmp_path))
    with pytest.raises(ReferenceTextError, match=r"hrbench-reference.*reference_repo"):
        make_suite("hrbench", {"path": path, "fidelity": "reference", "scorer": "official",
                               "reference_repo": str(tmp_path / "nowhere")}, blobs)
    with pytest.raises(ReferenceTextError, match=r"lmms_eval/tasks/hrbench/utils\.py is missing.*lmms-eval-reference"):
        make_suite("hrbench", {"path": path, "fidelity": "reference", "scorer": "lmms-eval",
                               "reference_repo": str(write_hrbench(tmp_path / "HR-Bench"))}, blobs)
    with pytest.raises(ValueError, match="judge role"):
        make_suite("hrbench", {"path": path, "fidelity": "reference", "scorer": "official",
                               "judge": "exact_matching", "reference_repo": str(tmp_path / "HR-Bench")}, blobs)
    bad = write_lmms_eval(tmp_path / "lmms-eval")
    evals = bad / "lmms_eval/tasks/hrbench/hrbench_evals.py"
    evals.write_text(evals.read_text().replace('"Q: {}\\nO: {}A: {}\\nOut: "', '"Q: {q}\\nOut: "'))
    with pytest.raises(ReferenceTextError, match="three positional fields"):
        lmms_texts({"reference_repo": str(bad)}, "reference")


def test_reference_prompts_are_the_fork_s_and_lmms_eval_s(tmp_path: Path, blobs: BlobStore) -> None:
    path = str(_hr_release(tmp_path))
    official = make_suite("hrbench", {"path": path, "fidelity": "reference", "scorer": "official",
                                      "reference_repo": str(write_hrbench(tmp_path / "HR-Bench"))}, blobs)
    task = _tasks(official)[4]  # the sign question, first rotation
    assert _shown(official, task) == ("SYNTH-HR-Question: Which sign is closer to the tree?\nSYNTH-HR-Options:\n"
                                      "A: Stop\nB: Yield\nC: Exit\nD: Bus\nSYNTH-HR pick one. \n")
    lmms = make_suite("hrbench", {"path": path, "fidelity": "reference", "scorer": "lmms-eval",
                                  "reference_repo": str(write_lmms_eval(tmp_path / "lmms-eval"))}, blobs)
    assert _shown(lmms, task) == "Which sign is closer to the tree?\nA= Stop\nB= Yield\nC= Exit\nD= Bus\nSYNTH-LMMS letter only."
    assert "<answer>" in _shown(lmms, task, "fixed")  # ours under fixed
    files = {t["file"] for t in (lmms.text_manifest() or {})["texts"]}
    assert files == {"lmms_eval/tasks/hrbench/utils.py", "lmms_eval/tasks/hrbench/hrbench_evals.py"}


def _sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, options: dict[str, Any],
           model: dict[str, Any], judge: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, Any], Path,
                                                                  Path]:
    config = support.write_config(tmp_path, {
        "name": name, "seeds": 1, "models": [model], "roles": {"judge": judge},
        "suites": [{"name": "hrbench", "options": {"path": str(_hr_release(tmp_path)), "fidelity": "reference",
                                                   **options}, "settings": [{"name": "direct"}]}]})
    run_dir = tmp_path / "run"
    code, _, err = support.cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    recs = {r["task_id"]: r for r in support.latest(run_dir)}
    assert len(recs) == 8, err
    rows = support.report_rows(capsys, run_dir)
    return recs, rows[(model["name"], "hrbench", "direct")]["suite_metrics"], config, run_dir


def test_official_scorer_judges_every_row_yes_or_no(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = {"name": "sim-hr", "provider": "sim", "policy": "scripted", "default_reply": "<answer>Stop</answer>",
             "script": [{"match": "bus", "reply": "<answer>112</answer>"}]}
    # Yes when the prediction names the gold's text; the sign rows get the replies that show the reading.
    judge = {"provider": "sim", "policy": "scripted", "default_reply": "no",
             "script": [{"match": r"GOLD<<[A-D]\. (\w+)>> PRED<<<answer>\1</answer>>>", "reply": "Yes."},
                        {"match": r"GOLD<<C\. Exit>>", "reply": "Yesterday's answer is wrong"},
                        {"match": r"GOLD<<B\. Exit>>", "reply": " yes"}]}
    repo = write_hrbench(tmp_path / "HR-Bench")
    recs, table, config, run_dir = _sweep(tmp_path, capsys, "hr-official", {"scorer": "official",
                                                                           "reference_repo": str(repo)}, model, judge)
    assert all(r["status"] == "ok" for r in recs.values())
    scores = {k: r["score_details"]["scores"] for k, r in sorted(recs.items(), key=lambda kv: int(kv[0]))}
    assert [s["reference"] for s in scores.values()] == [1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert [s["fixed"] for s in scores.values()] == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert recs["4"]["score_details"]["reference"]["judge_reply"] == "Yesterday's answer is wrong"
    assert recs["5"]["score_details"]["reference"]["judge_reply"] == " yes"
    # cycle average: cycle1 holds both questions right, the others the bus question only
    assert table["average"]["all"]["reference"] == pytest.approx((1 + 0.5 + 0.5 + 0.5) / 4)
    assert table["average"]["cross"]["reference"] == pytest.approx(0.25)
    assert table["circular"]["all"]["reference"] == 0.5 and table["circular"]["all"]["fixed"] == 0.5
    assert table["gap"] == pytest.approx(0.5 - 0.625)
    texts = json.dumps(json.loads((run_dir / "manifest.json").read_text())["texts"])
    assert "hrbench/vlmeval/dataset/utils/hrbench.py" in texts and "pipeline_eval.inp" in texts
    support.resume_and_rescore(capsys, config, run_dir, list(support.latest(run_dir)))


def test_lmms_eval_scorer_matches_then_asks_its_judge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = {"name": "sim-lm", "provider": "sim", "policy": "scripted", "default_reply": "the one with an arrow",
             "script": [{"match": "bus", "reply": "B"}]}
    # The options reach the judge lower-cased ("exit"), as lmms-eval's can_infer_text leaves them.
    judge = {"provider": "sim", "policy": "scripted", "default_reply": "",
             "script": [{"match": r"C\. exit\n", "reply": "C"}, {"match": r"B\. exit\n", "reply": "no idea"},
                        {"match": r"D\. exit\n", "reply": "A"}]}
    repo = write_lmms_eval(tmp_path / "lmms-eval")
    recs, table, _, _ = _sweep(tmp_path, capsys, "hr-lmms", {"scorer": "lmms-eval", "reference_repo": str(repo)},
                               model, judge)
    bus = [recs[str(i)] for i in range(4)]
    assert [r["score_details"]["scores"]["reference"] for r in bus] == [1.0, 0.0, 0.0, 0.0]  # "B": gold only in cycle1
    assert {r["score_details"]["reference"]["matched"] for r in bus} == {"can_infer"}
    right, unreadable, silent, wrong = (recs[str(i)] for i in range(4, 8))
    assert right["score"] == 1.0 and right["score_details"]["reference"]["judge_replies"] == ["C"]
    assert unreadable["status"] == "error" and "False.lower()" in unreadable["error"]
    assert silent["status"] == "error" and "10 judge calls" in silent["error"]
    assert len(silent["score_details"]["reference"]["judge_replies"]) == 10
    assert wrong["status"] == "ok" and wrong["score"] == 0.0
    # error rows count 0; cycle1: bus 1, sign 1 -> 1.0; the other cycles 0
    assert table["average"]["all"]["reference"] == pytest.approx(0.25)
    assert table["errors"] == 2


# --- MME-RealWorld CN -------------------------------------------------------------------------------------

def test_mme_cn_prompt_reads_the_chinese_header_and_instruction(tmp_path: Path, blobs: BlobStore) -> None:
    root = rel.mme_path_form(tmp_path / "mme", name="MME_RealWorld_CN.json")
    repo = write_vlmevalkit_cn(tmp_path / "VLMEvalKit")
    cn = make_suite("mme-realworld", {"path": str(root), "variant": "cn", "fidelity": "reference",
                                      "reference_repo": str(repo)}, blobs)
    task = _tasks(cn)[0]
    assert _shown(cn, task) == ("What is the data of Interest in Feb-23 in the table? SYNTH-选项:\n(A) 458\n(B) 457\n"
                                "(C) 456\n(D) 455\n(E) This image doesn't feature the data.\nSYNTH-中文 只答字母。\n答案：")
    symbols = {t["symbol"] for t in (cn.text_manifest() or {})["texts"]}
    assert "MMERealWorld.load_data.generate_tsv.choice_prompt.orelse" in symbols
    full = make_suite("mme-realworld", {"path": str(rel.mme_path_form(tmp_path / "mme_en")), "fidelity": "reference",
                                        "reference_repo": str(repo)}, blobs)
    assert "SYNTH lite header:\n(A) 458" in _shown(full, _tasks(full)[0])
    own = make_suite("mme-realworld", {"path": str(root), "variant": "cn", "fidelity": "reference",
                                       "texts": "own"}, blobs)
    assert "选项" in _shown(own, task) and "SYNTH" not in _shown(own, task)
    # a checkout without the CN entry (or header) names what is missing
    bare = tmp_path / "bare"
    (bare / "vlmeval/dataset").mkdir(parents=True)
    (bare / "vlmeval/dataset/image_mcq.py").write_text(
        (repo / "vlmeval/dataset/image_mcq.py").read_text().replace("'MME-RealWorld-CN'", "'MME-RealWorld-XX'"))
    with pytest.raises(ReferenceTextError, match="MME-RealWorld-CN"):
        make_suite("mme-realworld", {"path": str(root), "variant": "cn", "fidelity": "reference",
                                     "reference_repo": str(bare)}, blobs)


def test_symbols_reach_a_conditional_branch_and_an_inline_format_literal(tmp_path: Path) -> None:
    from fasteval.suites.reference_texts import python_value

    src = tmp_path / "m.py"
    src.write_text('def f(d):\n    h = "EN:\\n" if d == "en" else "CN:\\n"\n    t = "say {}".format(d)\n'
                   '    u = name.format(d)\n')
    assert python_value(src, "f.h.body") == "EN:\n" and python_value(src, "f.h.orelse") == "CN:\n"
    assert python_value(src, "f.t") == "say {}"
    with pytest.raises(ValueError, match="not a literal"):
        python_value(src, "f.u")  # only a literal's .format is read
    with pytest.raises(LookupError):
        python_value(src, "f.t.orelse")


def test_the_docs_table_lmms_eval_reads_a_leading_letter_upstream_does_not() -> None:
    """docs/suites/hrbench.md: lmms-eval's old can_infer has no last-four-tokens rule."""
    from fasteval.suites.mcq.matching import can_infer, fixed_choice

    opts = {"A": "21", "B": "112", "C": "121", "D": "12"}
    long = "B is correct because the number on the bus reads 112 clearly"
    assert (can_infer(long, opts, "upstream"), can_infer(long, opts, "hrbench"), fixed_choice(long, opts)[0]) == (
        None, "B", None)
    for tagged in ("<answer>B</answer>", "<answer>112</answer>", "112"):  # "12" is in "112": two texts match
        assert can_infer(tagged, opts, "upstream") is None and can_infer(tagged, opts, "hrbench") is None
        assert fixed_choice(tagged, opts)[0] == "B"


def test_data_fetch_pins_the_two_new_reference_checkouts(tmp_path: Path) -> None:
    from fasteval.suites.data_fetch import REFERENCE_REPOS
    from fasteval.suites.hrbench import lmms_judge, official_judge

    hr, lm = REFERENCE_REPOS["hrbench-reference"], REFERENCE_REPOS["lmms-eval-reference"]
    assert (hr.repo, hr.commit[:8]) == ("DreamMr/HR-Bench", "b17b1998")
    assert (lm.repo, lm.commit[:8]) == ("EvolvingLMMs-Lab/lmms-eval", "75571cfe")
    # the suites' defaults are where the fetch puts them
    assert str(hr.dest(Path("data"))) == official_judge.DEFAULT_REFERENCE_REPO
    assert str(lm.dest(Path("data"))) == lmms_judge.DEFAULT_REFERENCE_REPO


@pytest.mark.parametrize("scorer", ["official", "lmms-eval"])
def test_a_judged_scorer_without_its_judge_role_is_refused_before_anything_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], scorer: str) -> None:
    repo = write_hrbench(tmp_path / "HR-Bench") if scorer == "official" else write_lmms_eval(tmp_path / "lmms")
    options: dict[str, Any] = {"path": str(_hr_release(tmp_path)), "fidelity": "reference", "scorer": scorer,
                               "reference_repo": str(repo)}
    config = support.write_config(tmp_path, {
        "name": "hr-nojudge", "seeds": 1, "models": [{"name": "m", "provider": "sim"}],
        "suites": [{"name": "hrbench", "options": options, "settings": [{"name": "direct"}]}]})
    run_dir = tmp_path / "run"
    code, _, err = support.cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code == 2 and "suite hrbench (setting direct) scores with the role 'judge'" in err, err
    assert not run_dir.exists()
