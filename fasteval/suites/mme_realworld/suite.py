"""The MME-RealWorld suite (``variant: full|lite|cn``): 5-option questions on ~2000×1500 images.

Scorers: ``official`` (the repository's ``eval_your_results.py``, default), ``vlmevalkit``,
``lmms-eval``. Under ``fidelity: fixed`` the four answer options are shuffled per seed (E, "the
image does not feature ...", stays E) and the reply is read by our rule, so an empty output is
no answer instead of "A".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fasteval.core.options import Opt
from fasteval.core.types import Task
from fasteval.suites.base import LoadError, ScoreContext, Setting, register_suite
from fasteval.suites.mcq import aggregate as agg
from fasteval.suites.mcq.suite import ChoiceSuite, Scored, common_options
from fasteval.suites.mme_realworld.loader import VARIANTS, load_mme_realworld
from fasteval.suites.mme_realworld.prompt import prompt_texts, reference_prompt
from fasteval.suites.mme_realworld.reference_file import score_reference_file
from fasteval.suites.mme_realworld.scoring import SCORERS, reference_verdict
from fasteval.suites.row_checks import ALLOW_OPTION, image_roots


def _task_key(r: Mapping[str, Any]) -> str | None:
    return agg.meta(r, "task")


def _subtask_key(r: Mapping[str, Any]) -> str | None:
    task, sub = agg.meta(r, "task"), agg.meta(r, "subtask")
    return None if task is None or sub is None else f"{task}/{sub}"


def _fine_key(r: Mapping[str, Any]) -> str | None:
    sub, fine = _subtask_key(r), agg.meta(r, "fine_category")
    return None if sub is None or fine is None else f"{sub}/{fine}"


@register_suite
class MMERealWorld(ChoiceSuite):
    """MME-RealWorld (full, Lite, CN): five-option questions on real-world high-resolution images.

    Options: ``common_options`` plus ``variant`` and ``image_root`` (path form).
    """

    name = "mme-realworld"
    scorers = SCORERS
    pin_last = True
    options_schema = {**common_options("mme-realworld", SCORERS),
                      "variant": Opt("str", "full, lite or cn (default full)", choices=VARIANTS),
                      "image_root": Opt("path", "the unpacked image folder (path form; default: beside the JSON)")}

    def __init__(self, options: dict[str, Any], blobs: Any) -> None:
        super().__init__(options, blobs)
        self.variant = str(options.get("variant", "full"))
        if self.variant not in VARIANTS:
            raise ValueError(f"mme-realworld: variant must be one of {VARIANTS}, got {self.variant!r}")
        self.prompt_book = (prompt_texts(options, self.fidelity, self.variant)
                            if self.fidelity == "reference" else None)

    def prompt_text(self, task: Task, options: dict[str, str], setting: Setting) -> str:
        if self.prompt_book is not None and setting.fidelity == "reference":
            return reference_prompt(self.prompt_book, self.variant, task.turns[0].text, options)
        return super().prompt_text(task, options, setting)

    def load(self) -> Iterator[Task | LoadError]:
        image_root = self.options.get("image_root")
        extra = image_roots({ALLOW_OPTION: self.options[ALLOW_OPTION]}, Path(self.path)) if self.options.get(
            ALLOW_OPTION) else ()
        return load_mme_realworld(self.path, self.blobs, variant=self.variant, limit=self.limit,
                                  image_root=str(image_root) if image_root else None, allow_roots=tuple(extra))

    async def reference_score(self, task: Task, response: str | None, options: dict[str, str], gold: str,
                              ctx: ScoreContext, draw_key: str) -> Scored:
        value, letter, error = reference_verdict(self.scorer, response, options, gold)
        return Scored(value, {"letter": letter, "is_e": letter == "E"}, error)

    @classmethod
    def aggregate(cls, records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Overall, per Task (item-weighted), per Task/Subtask and per fine category, both fidelities."""
        return {**agg.both(records), "errors": agg.errors(records),
                "by_task": agg.grouped(records, _task_key), "by_category": agg.grouped(records, _subtask_key),
                "by_subcategory": agg.grouped(records, _fine_key)}

    @classmethod
    def score_file(cls, path: Path, fidelity: str, options: dict[str, Any]) -> dict[str, Any]:
        return score_reference_file(Path(path), fidelity, options)
