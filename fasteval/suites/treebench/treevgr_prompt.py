"""TreeVGR's TreeBench prompt (``inference_treebench.py``, ``eval_model_row``), read from the checkout.

System: TreeVGR's format instruction (think in <think>, boxes in <box>, answer in <answer>).
User: the image, then ``question + " Options:\\n" + multi-choice options`` and TreeVGR's
instruction line. (TreeVGR also pre-fills ``<think>`` in the assistant turn, which a chat API
cannot; its OCR-only branch never fires, since categories are ``Perception/OCR``.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasteval.suites.reference_texts import Template, TextBook, TextSpec, load_text_book, text_options

PROMPT_FILE = "inference_treebench.py"
DEFAULT_REFERENCE_REPO = "data/reference/TreeVGR"
FETCH_HINT = "fasteval data fetch treevgr-reference --dest data"
QUESTION = "item['question']"
OPTIONS = "item['multi-choice options']"

SPECS = [
    TextSpec("system", "system_prompt", PROMPT_FILE, "eval_model_row.{role=system}.content[0].text",
             "Think inside <think></think>, give boxes of the objects you refer to as <box>[x1,y1,x2,y2]</box>, "
             "and answer inside <answer></answer>."),
    TextSpec("question", "system_prompt", PROMPT_FILE, "eval_model_row.qs@1",
             Template.from_format("{q}\nOptions:\n{o}")),
    TextSpec("user", "system_prompt", PROMPT_FILE, "eval_model_row.content[1].text",
             Template.from_format("{qs}\nAnswer with the option's letter inside <answer></answer>.")),
]


def treevgr_texts(options: Mapping[str, Any], fidelity: str) -> TextBook:
    mode, repo = text_options(options, fidelity)
    return load_text_book("treebench-treevgr", SPECS, mode, repo or DEFAULT_REFERENCE_REPO, FETCH_HINT)


def treevgr_user_text(texts: TextBook, question: str, mc_options: str) -> str:
    """The user text as ``eval_model_row`` builds it."""
    q = texts.get("question")
    values = {QUESTION: question, OPTIONS: mc_options, "q": question, "o": mc_options}
    qs = q.render({k: values[k] for k in q.fields}) if isinstance(q, Template) else str(q)
    u = texts.get("user")
    return u.render({f: qs for f in u.fields}) if isinstance(u, Template) else str(u)
