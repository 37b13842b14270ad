"""MME-RealWorld's prompt under ``fidelity: reference`` (VLMEvalKit ``MMERealWorld.build_prompt``;
the official README and lmms-eval send the same text): ``question + ' ' + choices header + the
"(A) …" choices + '\\n' + SYS[dataset]``. Both pieces are read at run time from
``vlmeval/dataset/image_mcq.py`` of the user's VLMEvalKit checkout, per variant:

- full / Lite: ``SYS['MME-RealWorld']`` / ``SYS['MME-RealWorld-Lite']`` and the English header
  ``"The choices are listed below:\\n"`` (the Lite branch's ``choice_prompt`` in ``load_data``);
- cn: ``SYS['MME-RealWorld-CN']`` and the Chinese header, the ``else`` branch of the conditional
  ``choice_prompt = "…" if dataset in [English names] else "…"`` in ``load_data.generate_tsv``
  (where VLMEvalKit builds the CN table's ``multi-choice options``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasteval.suites.mcq import judge
from fasteval.suites.reference_texts import (
    ReferenceTextError,
    TextBook,
    TextSpec,
    load_text_book,
    text_options,
)

PROMPT_FILE = "vlmeval/dataset/image_mcq.py"
DATASET_NAMES = {"full": "MME-RealWorld", "lite": "MME-RealWorld-Lite", "cn": "MME-RealWorld-CN"}
_OWN_SYS = "Answer with the letter (A, B, C, D or E) of the correct option."
_OWN_SYS_CN = "请只回答正确选项的字母（A、B、C、D 或 E）。"
HEADER_SYMBOLS = {"full": "MMERealWorld.load_data.choice_prompt", "lite": "MMERealWorld.load_data.choice_prompt",
                  "cn": "MMERealWorld.load_data.generate_tsv.choice_prompt.orelse"}
_OWN_HEADERS = {"full": "Choices:\n", "lite": "Choices:\n", "cn": "选项：\n"}


def specs_for(variant: str) -> list[TextSpec]:
    """The instruction table and this variant's choices header."""
    own_sys = {name: (_OWN_SYS_CN if v == "cn" else _OWN_SYS) for v, name in DATASET_NAMES.items()}
    return [TextSpec("sys", "system_prompt", PROMPT_FILE, "MMERealWorld.SYS", own_sys, kind="data"),
            TextSpec("header", "system_prompt", PROMPT_FILE, HEADER_SYMBOLS[variant], _OWN_HEADERS[variant])]


def prompt_texts(options: Mapping[str, Any], fidelity: str, variant: str = "full") -> TextBook:
    """The variant's texts; a checkout whose ``SYS`` lacks the variant's entry stops here."""
    mode, repo = text_options(options, fidelity)
    book = load_text_book("mme-realworld-prompt", specs_for(variant), mode, repo or judge.DEFAULT_REFERENCE_REPO,
                          judge.FETCH_HINT)
    name = DATASET_NAMES[variant]
    sys_texts = book.get("sys")
    if not isinstance(sys_texts, dict) or not isinstance(sys_texts.get(name), str):
        raise ReferenceTextError(f"mme-realworld: MMERealWorld.SYS in {PROMPT_FILE} of {book.repo} has no text "
                                 f"for {name!r}; the checkout may be at another commit (set reference_repo, "
                                 "or texts: own)")
    return book


def reference_prompt(texts: TextBook, variant: str, question: str, options: Mapping[str, str]) -> str:
    instruction = texts.get("sys")[DATASET_NAMES[variant]]
    choices = str(texts.get("header")) + "\n".join(f"({k}) {v}" for k, v in options.items())
    return f"{question} {choices}\n{instruction}"
