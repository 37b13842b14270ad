"""``demo``: a small built-in suite that needs a crop and the calculator, generated from a seed.

Each image hides a uniform grey square (plus distractors) in noise; the prompt names a box in
0–1000 coordinates and asks for the square's grey level plus a number. Reading the level needs
a zoom into the box, so tool use measurably helps. Every fourth task has a second turn that
builds on the first answer, exercising multi-turn trajectories.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from typing import Any

import pyvips

from fasteval.core.options import Opt
from fasteval.core.tagged import Tagged
from fasteval.core.types import Task, Trajectory, Turn
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, Suite, register_suite


def render(rng: random.Random, width: int, height: int) -> tuple[bytes, list[int], int]:
    """A noisy image with a target square; returns PNG bytes, its 0–1000 box and its level."""
    import numpy as np  # here: importing the suites (a report) draws no image

    nrng = np.random.default_rng(rng.randrange(2**32))
    pixels = nrng.integers(90, 170, size=(height, width), dtype=np.uint8)
    squares: list[tuple[int, int, int, int]] = []
    level = 0
    box: list[int] = []
    for i in range(4):
        side = rng.randint(min(width, height) // 12, min(width, height) // 7)
        for _ in range(100):
            x, y = rng.randint(0, width - side - 1), rng.randint(0, height - side - 1)
            if all(x + side + 8 < a or a + s + 8 < x or y + side + 8 < b or b + s + 8 < y for a, b, s, _ in squares):
                break
        value = rng.choice([v for v in range(15, 241) if not 80 <= v <= 180])
        pixels[y:y + side, x:x + side] = value
        squares.append((x, y, side, value))
        if i == 0:
            level = value
            pad = side // 10
            box = [round((x - pad) * 1000 / width), round((y - pad) * 1000 / height),
                   round((x + side + pad) * 1000 / width), round((y + side + pad) * 1000 / height)]
            box = [max(0, min(1000, v)) for v in box]
    img = pyvips.Image.new_from_memory(pixels.tobytes(), width, height, 1, "uchar")
    return bytes(img.pngsave_buffer(compression=1)), box, level


_ANSWER = Tagged("<answer>", "</answer>")


@register_suite
class DemoSuite(Suite):
    """Deterministic grey-square tasks; scored by exact match per turn."""

    name = "demo"
    options_schema = {"n_tasks": Opt("int", "how many tasks"), "seed": Opt("int", "task generator seed"),
                      "image_size": Opt("list", "[width, height]"),
                      "multi_turn_every": Opt("int", "every n-th task has a second user turn")}
    setting_options = {}

    def load(self) -> Iterator[Task | LoadError]:
        n = int(self.options.get("n_tasks", 12))
        base_seed = int(self.options.get("seed", 0))
        width, height = self.options.get("image_size", [1024, 768])
        every = int(self.options.get("multi_turn_every", 4))
        for i in range(n):
            rng = random.Random(f"demo-{base_seed}-{i}")
            png, box, level = render(rng, int(width), int(height))
            ref = self.blobs.put(png)
            add = rng.randint(3, 60)
            first = (f"A uniform grey square lies inside the box [{box[0]}, {box[1]}, {box[2]}, {box[3]}] "
                     f"(coordinates normalised to 0-1000 of the image width and height). Read its grey level "
                     f"(0-255) and add {add} to it. Answer with the number only.")
            turns = [Turn(text=first, images=[ref], reference=str(level + add))]
            if every and i % every == every - 1:
                sub = rng.randint(1, 20)
                turns.append(Turn(text=f"Now subtract {sub} from your previous answer. Answer with the number only.",
                                  reference=str(level + add - sub)))
            yield Task(id=f"demo-{base_seed}-{i:04d}", turns=turns, tools=["image_zoom_in_tool", "calculator"],
                       reference=turns[-1].reference, metadata={"level": level, "turns": len(turns)})

    def default_settings(self) -> list[Setting]:
        return [Setting(name="tools", max_rounds=6), Setting(name="no-tools", tools=[], max_rounds=6)]

    def extract_answer(self, text: str, setting: Setting) -> str:
        tag = _ANSWER.first(text)
        return (tag if tag is not None else text).strip()

    async def score(self, task: Task, trajectory: Trajectory, setting: Setting, ctx: ScoreContext) -> Score:
        per_turn: list[float] = []
        for turn, answer in zip(task.turns, trajectory.answers + [None] * len(task.turns), strict=False):
            per_turn.append(1.0 if answer is not None and exact_match(answer, turn.reference) else 0.0)
        details: dict[str, Any] = {"per_turn": per_turn}
        return Score(value=sum(per_turn) / len(per_turn), details=details)


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().strip(".").lower())


def exact_match(answer: str, reference: Any) -> bool:
    return normalise(answer) == normalise(str(reference))
