"""DeepEyes' V* scorer (``eval/judge_result.py``, §1.3): rule checks, then an LLM judge.

``pred_ans`` is the text between the first ``<answer>`` and the next ``</answer>`` of the final
reply (else the whole reply), the inside of a ``\\boxed{`` if any. The standard answer is
"<gold letter>. <gold text>" (DeepEyes writes "A. " + the first option: its prompt keeps the
release order, so the gold is always A). Rules: one character → right iff it is the gold letter;
two characters with a "." → right iff they contain the gold letter; the standard answer inside
``pred_ans`` → right. Otherwise the judge (temperature 0) gets DeepEyes' chat template, its seven
in-context examples and the test block, read at run time from the user's DeepEyes checkout; its
reply is right if the text after the last "Judgement:" holds a "1" (else a bare "1"); anything
unreadable is 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from fasteval.core.tagged import Tagged
from fasteval.suites.judge_retry import JudgeModel
from fasteval.suites.reference_texts import Template, TextBook, TextSpec, load_text_book, text_options
from providers import ChatRequest

JUDGE_FILE = "eval/judge_result.py"
DEFAULT_REFERENCE_REPO = "data/reference/DeepEyes"
FETCH_HINT = "fasteval data fetch deepeyes-reference --dest data"
N_EXAMPLES = 7

OWN_SYSTEM = "You compare a model's answer with the standard answer."
OWN_TEMPLATE = "Reply 1 if [Model_answer] means the same as [Standard Answer], else 0.\n\n"
OWN_EXAMPLE = "\n[Question]: Is the cup red?\n[Standard Answer]: A. The cup is red.\n[Model_answer] : red\nJudgement: 1\n"
OWN_TEST = Template.from_format("\n[Question]: {question}\n[Standard Answer]: {ground_truth}\n"
                                "[Model_answer] : {predict_str}\nJudgement:")
SPECS = [
    TextSpec("system", "judge_prompt", JUDGE_FILE, "process.{role=system}.content", OWN_SYSTEM),
    TextSpec("template", "judge_prompt", JUDGE_FILE, "get_chat_template.chat_template", OWN_TEMPLATE),
    *(TextSpec(f"example_{i}", "demo", JUDGE_FILE, f"get_gpt4_score_ICE.example_{i}", OWN_EXAMPLE)
      for i in range(1, N_EXAMPLES + 1)),
    TextSpec("test", "judge_prompt", JUDGE_FILE, "get_prompt.test_prompt", OWN_TEST),
]
_ANSWER = Tagged("<answer>", "</answer>")


def deepeyes_texts(options: Mapping[str, Any], fidelity: str) -> TextBook:
    mode, repo = text_options(options, fidelity)
    return load_text_book("vstar-deepeyes", SPECS, mode, repo or DEFAULT_REFERENCE_REPO, FETCH_HINT)


def pred_ans(reply: str) -> str:
    tag = _ANSWER.first(reply)
    text = tag if tag is not None else reply
    if "\\boxed" in text and "\\boxed{" in text:
        text = text.split("\\boxed{")[1].split("}")[0]
    return text


def rule_check(pred: str, gold: str, standard: str) -> float | None:
    """The rule verdict, or None when the judge decides."""
    if len(pred) == 1:
        return 1.0 if pred == gold else 0.0
    if len(pred) == 2 and "." in pred:
        return 1.0 if gold in pred else 0.0
    if standard in pred:
        return 1.0
    return None


def read_judgement(reply: str) -> float:
    reply = reply.strip()
    if "Judgement:" in reply:
        tail = reply.split("Judgement:")[-1].strip()
        return 1.0 if "1" in tail else 0.0
    return 1.0 if reply == "1" else 0.0


def judge_prompt(texts: TextBook, question: str, standard: str, pred: str) -> str:
    demo = str(texts.get("template")) + "".join(str(texts.get(f"example_{i}")) + "\n\n"
                                                for i in range(1, N_EXAMPLES + 1))
    return demo + texts.render("test", question=question, ground_truth=standard, predict_str=pred)


async def deepeyes_score(reply: str, options: Mapping[str, str], gold: str, question: str, *,
                         judge: JudgeModel | None, texts: TextBook,
                         timeout_s: float = 300.0) -> tuple[float | None, dict[str, Any], str | None]:
    """(score, details, error): a reply the rules cannot decide needs the judge role."""
    pred = pred_ans(reply)
    standard = f"{gold}. {options[gold]}"
    ruled = rule_check(pred, gold, standard)
    details: dict[str, Any] = {"pred_ans": pred}
    if ruled is not None:
        return ruled, details | {"matched": "rule"}, None
    if judge is None:
        return None, details, "judge_error: DeepEyes' V* scorer needs a judge role for this reply"
    request = ChatRequest(messages=[{"role": "system", "content": str(texts.get("system"))},
                                    {"role": "user", "content": judge_prompt(texts, question, standard, pred)}],
                          params={"temperature": 0.0})
    try:
        response = await asyncio.wait_for(judge.chat(request), timeout_s)
    except TimeoutError:
        return None, details, f"judge_error: no judge reply within {timeout_s:g}s"
    reply_text = response.content or ""
    return read_judgement(reply_text), details | {"matched": "judge", "judge_reply": reply_text}, None
