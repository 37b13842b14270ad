"""MME-RealWorld's prompt under ``fidelity: reference`` (VLMEvalKit ``MMERealWorld.build_prompt``;
the official README and lmms-eval send the same text): ``question + ' ' + "The choices are listed
below:\\n" + the "(A) …" choices + '\\n' + SYS[dataset]``. ``SYS`` and the choices header are read at
run time from ``vlmeval/dataset/image_mcq.py`` of the user's VLMEvalKit checkout. The CN header sits
in a conditional expression there and cannot be read, so ``variant: cn`` keeps our wording.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasteval.suites.mcq import judge
from fasteval.suites.reference_texts import TextBook, TextSpec, load_text_book, text_options

PROMPT_FILE = "vlmeval/dataset/image_mcq.py"
DATASET_NAMES = {"full": "MME-RealWorld", "lite": "MME-RealWorld-Lite"}
_OWN_SYS = "Answer with the letter (A, B, C, D or E) of the correct option."
SPECS = [
    TextSpec("sys", "system_prompt", PROMPT_FILE, "MMERealWorld.SYS",
             {name: _OWN_SYS for name in DATASET_NAMES.values()}, kind="data"),
    TextSpec("header", "system_prompt", PROMPT_FILE, "MMERealWorld.load_data.choice_prompt", "Choices:\n"),
]


def prompt_texts(options: Mapping[str, Any], fidelity: str) -> TextBook:
    mode, repo = text_options(options, fidelity)
    return load_text_book("mme-realworld-prompt", SPECS, mode, repo or judge.DEFAULT_REFERENCE_REPO, judge.FETCH_HINT)


def reference_prompt(texts: TextBook, variant: str, question: str, options: Mapping[str, str]) -> str:
    sys_texts = texts.get("sys")
    instruction = str(sys_texts[DATASET_NAMES[variant]]) if isinstance(sys_texts, dict) else ""
    choices = str(texts.get("header")) + "\n".join(f"({k}) {v}" for k, v in options.items())
    return f"{question} {choices}\n{instruction}"
