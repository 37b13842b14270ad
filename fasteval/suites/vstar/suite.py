"""The V* Bench suite: 191 questions over ~2K SA-1B images, two categories.

Scorers: ``vlmevalkit`` (``can_infer``, then the judge fallback; §1.3) or ``lmms-eval``
(``extract_answer_letter``). Under ``fidelity: reference`` the options keep the release's order,
so with the official folders the answer is always A, as DeepEyes' V* script sends it; under
``fixed`` they are shuffled per seed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fasteval.core.types import Task
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, ScoreContext, Setting, register_suite
from fasteval.suites.mcq import aggregate as agg
from fasteval.suites.mcq.judge import EXACT_MATCHING, vlmevalkit_option
from fasteval.suites.mcq.matching import lmms_eval_letter
from fasteval.suites.mcq.suite import ChoiceSuite, Scored, common_options
from fasteval.suites.vstar.deepeyes import deepeyes_score, deepeyes_texts
from fasteval.suites.vstar.loader import load_vstar
from fasteval.suites.vstar.reference_file import score_reference_file

SCORERS = ("vlmevalkit", "lmms-eval", "deepeyes")


@register_suite
class VStar(ChoiceSuite):
    """V* Bench: 191 questions on small details of ~2K images (attributes, spatial relations).

    Options: ``common_options``; ``scorer`` vlmevalkit (default), lmms-eval or deepeyes.
    """

    name = "vstar"
    scorers = SCORERS
    vlmevalkit_layout = "ImageMCQDataset"
    options_schema = common_options("vstar", SCORERS)

    def __init__(self, options: dict[str, Any], blobs: BlobStore) -> None:
        deepeyes = options.get("scorer") == "deepeyes"
        role = str(options.get("judge") or "judge")
        # DeepEyes' judge is its own (texts from its checkout), not VLMEvalKit's fallback.
        super().__init__({**options, "judge": EXACT_MATCHING} if deepeyes else options, blobs)
        self.deepeyes_book = deepeyes_texts(options, self.fidelity) if deepeyes else None
        if deepeyes:
            self.judge_role = role

    def text_manifest(self) -> dict[str, Any] | None:
        return self.deepeyes_book.manifest() if self.deepeyes_book else super().text_manifest()

    def text_listing(self, setting: Setting) -> list[dict[str, Any]]:
        return self.deepeyes_book.listing() if self.deepeyes_book else super().text_listing(setting)

    def load(self) -> Iterator[Task | LoadError]:
        return load_vstar(self.path, self.blobs, limit=self.limit)

    async def reference_score(self, task: Task, response: str | None, options: dict[str, str], gold: str,
                              ctx: ScoreContext, draw_key: str) -> Scored:
        text = "" if response is None else response
        if self.deepeyes_book is not None:
            value, found, error = await deepeyes_score(text, options, gold, task.turns[0].text,
                                                       judge=ctx.services.get(self.judge_role),
                                                       texts=self.deepeyes_book)
            return Scored(value, found, error)
        if self.scorer == "lmms-eval":
            letter = lmms_eval_letter(text)
            return Scored(1.0 if letter == gold else 0.0, {"letter": letter})
        judge = ctx.services.get(self.judge_role) if self.judge_book else None
        matched = await vlmevalkit_option(text, options, task.turns[0].text, judge=judge, texts=self.judge_book,
                                          version=self.matcher, draw_key=draw_key)
        details: dict[str, Any] = {"letter": matched.letter, "matched": matched.how}
        if matched.judge_replies:
            details["judge_replies"] = matched.judge_replies
        if self.judge_book and judge is None:
            details["judge_missing"] = True  # VLMEvalKit falls back to exact matching silently; we say so
        return Scored(1.0 if matched.letter == gold else 0.0, details)

    @classmethod
    def aggregate(cls, records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Overall (micro mean over questions) and per category, reference and fixed side by side."""
        return {**agg.both(records), "errors": agg.errors(records),
                "by_category": agg.grouped(records, lambda r: agg.meta(r, "category"))}

    @classmethod
    def score_file(cls, path: Path, fidelity: str, options: dict[str, Any]) -> dict[str, Any]:
        return score_reference_file(Path(path), fidelity, options)
