"""The TreeBench suite: 405 questions with target boxes ("traceable evidence").

Scorers: ``vlmevalkit`` (default; TreeVGR's README says its numbers came from VLMEvalKit) and
``treevgr`` (its demo scorer: exact letter, IoU on the whole reply). Every record carries the
letter score and the box IoU under both the reference rule and ours; ``box_convention`` says
how the model writes boxes (pixel, norm1000, norm1 or auto).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fasteval.core.options import Opt
from fasteval.core.types import Task, Trajectory
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, register_suite
from fasteval.suites.mcq import aggregate as agg
from fasteval.suites.mcq.suite import ChoiceSuite, Scored, common_options
from fasteval.suites.reference_texts import TextBook
from fasteval.suites.treebench.boxes import CONVENTIONS, Box, fixed_iou
from fasteval.suites.treebench.loader import load_treebench
from fasteval.suites.treebench.reference_file import score_reference_file
from fasteval.suites.treebench.scoring import BOX_INSTRUCTION, EMPTY_CRASH, reference_iou, reference_letter
from fasteval.suites.treebench.treevgr_prompt import treevgr_texts, treevgr_user_text

SCORERS = ("vlmevalkit", "treevgr")
def _targets(task: Task) -> list[Box]:
    return [(b[0], b[1], b[2], b[3]) for b in task.metadata.get("targets") or []]


@register_suite
class TreeBench(ChoiceSuite):
    """TreeBench: 405 questions with target boxes; accuracy and mIoU of the boxes in the reasoning.

    Options: ``common_options`` plus ``box_convention``.
    """

    name = "treebench"
    scorers = SCORERS
    shuffles = False
    vlmevalkit_layout = "TreeBench"
    options_schema = {**common_options("treebench", SCORERS),
                      "box_convention": Opt("str", "how the model writes boxes: auto, pixel, norm1000, norm1",
                                            choices=CONVENTIONS)}

    def __init__(self, options: dict[str, Any], blobs: Any) -> None:
        super().__init__(options, blobs)
        self.treevgr_book: TextBook | None = (treevgr_texts(options, self.fidelity)
                                              if self.fidelity == "reference" and self.scorer == "treevgr" else None)
        self.box_convention = str(options.get("box_convention", "auto"))
        if self.box_convention not in CONVENTIONS:
            raise ValueError(f"treebench: box_convention must be one of {CONVENTIONS}")

    def load(self) -> Iterator[Task | LoadError]:
        return load_treebench(self.path, self.blobs, limit=self.limit)

    def _books(self) -> list[TextBook]:
        return [*super()._books(), *([self.treevgr_book] if self.treevgr_book else [])]

    def system_prompt(self, task: Task, setting: Setting, tool_specs: list[dict[str, Any]]) -> str | None:
        if self.treevgr_book is not None and setting.fidelity == "reference":
            return str(self.treevgr_book.get("system"))
        return None

    def prompt_text(self, task: Task, options: dict[str, str], setting: Setting) -> str:
        if self.treevgr_book is not None and setting.fidelity == "reference":
            listed = str(task.metadata.get("mc_options") or "") or "\n".join(f"{k}. {v}" for k, v in options.items())
            return treevgr_user_text(self.treevgr_book, task.turns[0].text, listed)
        if self.prompt_book is not None and setting.fidelity == "reference":
            return super().prompt_text(task, options, setting)  # VLMEvalKit's TreeBench layout as it is
        return f"{super().prompt_text(task, options, setting)}\n{BOX_INSTRUCTION}"

    async def reference_score(self, task: Task, response: str | None, options: dict[str, str], gold: str,
                              ctx: ScoreContext, draw_key: str) -> Scored:
        if not response and self.scorer == "vlmevalkit":
            return Scored(None, {"iou": None}, EMPTY_CRASH)
        text = response or ""
        value, letter = reference_letter(self.scorer, text, gold)
        return Scored(value, {"letter": letter, "iou": reference_iou(self.scorer, text, _targets(task))})

    async def score(self, task: Task, trajectory: Trajectory, setting: Setting, ctx: ScoreContext) -> Score:
        score = await super().score(task, trajectory, setting, ctx)
        response = trajectory.answers[0] if trajectory.answers else None
        fixed = fixed_iou(response or "", _targets(task), self.box_convention, int(task.metadata["width"]),
                          int(task.metadata["height"]))
        score.details["iou"] = {"reference": score.details["reference"].get("iou"), "fixed": fixed}
        return score

    @classmethod
    def aggregate(cls, records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Overall and per Task/Subtask accuracy, and mIoU, reference and fixed side by side."""
        with_targets = [r for r in records if (r.get("metadata") or {}).get("n_targets", 1)]
        return {**agg.both(records), "errors": agg.errors(records),
                "miou_reference": agg.both(records, "iou")["reference"],
                "miou_fixed": agg.both(with_targets, "iou")["fixed"],
                "by_category": agg.grouped(records, lambda r: agg.meta(r, "category"))}

    @classmethod
    def score_file(cls, path: Path, fidelity: str, options: dict[str, Any]) -> dict[str, Any]:
        return score_reference_file(Path(path), fidelity, options)
