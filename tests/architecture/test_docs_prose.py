"""The manual's prose says each thing once: a paragraph that repeats a run of eight words is a
botched edit (#39 item 16: serving.md's "The vLLM check" carried its command and "(or `--model
PATH` for a real checkpoint). It" twice, half of a sentence left behind by a rewrite)."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
RUN = 8


def repeated_runs(text: str) -> list[str]:
    """Each paragraph (a list item counts as one; tables and code blocks are left out) that holds
    the same ``RUN`` words twice, not overlapping, with the words."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    found = []
    for block in re.split(r"\n\s*\n", text):
        for para in re.split(r"\n(?=\s*(?:[-*]|\d+\.) )", block):
            if para.lstrip().startswith("|"):
                continue
            words = para.split()
            first: dict[tuple[str, ...], int] = {}
            for i in range(len(words) - RUN + 1):
                run = tuple(words[i:i + RUN])
                if i - first.setdefault(run, i) >= RUN:
                    found.append(" ".join(run))
                    break
    return found


def test_no_paragraph_of_the_docs_says_the_same_words_twice() -> None:
    hits = {str(p.relative_to(DOCS)): h for p in sorted(DOCS.rglob("*.md")) if (h := repeated_runs(p.read_text()))}
    assert not hits, hits


def test_the_check_finds_the_broken_sentence_it_was_written_for() -> None:
    broken = ("lent: `python benchmarks/vllm_local.py --json` on an H200 node with `pip install vllm` (or\n"
              "`--model PATH` for a real checkpoint). It\n"
              "`python benchmarks/vllm_local.py --json` (or `--model PATH` for a real checkpoint). It\n")
    assert repeated_runs(broken) == ["(or `--model PATH` for a real checkpoint). It"]
