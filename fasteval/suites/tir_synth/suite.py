"""The ``tir-synth`` suite: generated TIR-Bench-like items scored by the TIR-Bench rules.

Options: ``seed`` (default 0), ``n_per_type`` (default 3), ``types`` (default: all generators).
Settings: ``tool`` (``python_image_processing``, 6 rounds) and ``no-tool``. There is no answer
extractor: the final message is scored as the extracted answer, by TIR-Bench's rule (the
reference) and, for multiple choice, by our fixed rule too (a letter or an option's text, else
wrong: no snapping to the nearest letter); ``fidelity: fixed`` makes the fixed one the headline,
and the report and leaderboard show both.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

from fasteval.core.options import Opt
from fasteval.core.types import Task, Trajectory, Turn
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, Suite, register_suite
from fasteval.suites.mcq.aggregate import both, field, grouped, meta
from fasteval.suites.mcq.matching import fixed_choice
from fasteval.suites.tir_synth.generators import GENERATORS, generate
from fasteval.suites.tirbench import score_item, scoring_rule

_OPTION = re.compile(r"^([A-Z])\. (.+)$", re.MULTILINE)


def prompt_options(prompt: str) -> dict[str, str]:
    """The ``A. text`` lines of a generated prompt, by letter (the generators write them so)."""
    return {m.group(1): m.group(2).strip() for m in _OPTION.finditer(prompt)}

TOOLS = ["python_image_processing"]


@register_suite
class TIRSynth(Suite):
    """Procedural jigsaw, maze, spot-the-difference, low-light, search, proportion, colour, rotation."""

    name = "tir-synth"
    options_schema = {"seed": Opt("int", "generator seed"), "n_per_type": Opt("int", "tasks per task type"),
                      "types": Opt("str_list", "task types to generate (default: all)")}
    setting_options = {}

    def load(self) -> Iterator[Task | LoadError]:
        seed = int(self.options.get("seed", 0))
        per_type = int(self.options.get("n_per_type", 3))
        types = list(self.options.get("types") or GENERATORS)
        for task_type in types:
            if task_type not in GENERATORS:
                yield LoadError(f"tir-synth-{seed}-{task_type}", f"unknown task type {task_type!r}; "
                                f"known: {sorted(GENERATORS)}")
                continue
            for i in range(per_type):
                task_id = f"tir-synth-{seed}-{task_type}-{i:03d}"
                try:
                    synth = generate(task_type, seed, i)
                except Exception as exc:  # a generator bug costs one task, not the sweep
                    yield LoadError(task_id, f"{type(exc).__name__}: {exc}")
                    continue
                refs = [self.blobs.put(img) for img in synth.images]
                yield Task(id=task_id, turns=[Turn(text=synth.prompt, images=refs, reference=synth.answer)],
                           tools=list(TOOLS), reference=synth.answer,
                           metadata={"task_type": task_type, "index": i, "seed": seed, **synth.meta})

    def default_settings(self) -> list[Setting]:
        return [Setting(name="tool", tools=list(TOOLS), max_rounds=6), Setting(name="no-tool", tools=[])]

    async def score(self, task: Task, trajectory: Trajectory, setting: Setting, ctx: ScoreContext) -> Score:
        """The reference rule and our fixed one, both on every record (``scores``); the setting's
        fidelity picks the headline. They differ on multiple choice only: the reference snaps any
        text to the nearest letter, so a junk answer scores at chance there and 0 here."""
        task_type = str(task.metadata["task_type"])
        answer = trajectory.answers[0] if trajectory.answers else None
        rule = scoring_rule(task_type, task.reference)
        details: dict[str, Any] = {"task_type": task_type, "rule": rule}
        if answer is None:
            return Score(0.0, details | {"no_response": True, "scores": {"reference": 0.0, "fixed": 0.0}})
        meta = {"prompt": task.turns[0].text, "difficulty": task.metadata.get("difficulty")}
        ref = await asyncio.to_thread(score_item, task_type, answer, answer, task.reference, setting.fidelity, meta)
        fixed = ref
        if rule == "choice" and len(str(task.reference)) == 1:
            letter, where = fixed_choice(answer, prompt_options(task.turns[0].text))
            fixed = 1.0 if letter == task.reference else 0.0
            details["fixed"] = {"letter": letter, "found": where}
        details |= {"extracted": answer, "scores": {"reference": ref, "fixed": fixed}}
        return Score(fixed if setting.fidelity == "fixed" else ref, details)

    @classmethod
    def aggregate(cls, records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Both rules side by side (mean ± std over seeds) overall and per multiple-choice task type
        (where they can differ), as the multiple-choice suites show them: the gap is what
        nearest-letter snapping adds."""
        if not records:
            return None
        choice = grouped(records, lambda r: meta(r, "task_type")
                         if field(r, "score_details").get("rule") == "choice" else None)
        return {**both(records, per_seed=False), "multiple_choice_by_task_type": choice}
