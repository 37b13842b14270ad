"""The ``tir-synth`` suite: generated TIR-Bench-like items scored by the TIR-Bench rules.

Options: ``seed`` (default 0), ``n_per_type`` (default 3), ``types`` (default: all generators).
Settings: ``tool`` (``python_image_processing``, 6 rounds) and ``no-tool``. There is no answer
extractor: the final message is scored as the extracted answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from fasteval.core.options import Opt
from fasteval.core.types import Task, Trajectory, Turn
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, Suite, register_suite
from fasteval.suites.tir_synth.generators import GENERATORS, generate
from fasteval.suites.tirbench import score_item, scoring_rule

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
        task_type = str(task.metadata["task_type"])
        answer = trajectory.answers[0] if trajectory.answers else None
        details: dict[str, Any] = {"task_type": task_type, "rule": scoring_rule(task_type, task.reference)}
        if answer is None:
            return Score(0.0, details | {"no_response": True})
        meta = {"prompt": task.turns[0].text, "difficulty": task.metadata.get("difficulty")}
        value = await asyncio.to_thread(
            score_item, task_type, answer, answer, task.reference, setting.fidelity, meta
        )
        return Score(value, details | {"extracted": answer})
