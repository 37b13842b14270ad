"""Sim policies for ``tir-synth``: ``oracle`` solves through the sandbox, ``guess`` does not look.

``oracle`` recognises the task type from the prompt wording, sends real Python to the
``python_image_processing`` tool and answers with the last line the code printed. It never reads
the images itself and knows no answer key, so a broken tool path (sandbox down, inputs missing,
stdout lost) shows up as a wrong answer. Low-light tasks take two steps: enhance and save an
image, then (only if that image came back) count the spots. Without the tool it falls back to
``guess``, which answers at once with a plausible, seeded, uninformed answer.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from providers.sim.conversation import View, read_conversation
from providers.sim.policies import Reply, answer, call, register_policy
from providers.sim.spec import SimModel

TOOL = "python_image_processing"

# Colour names as any model knows them; the sim's copy, not the generator's.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30), "green": (30, 170, 60), "blue": (40, 70, 220), "yellow": (240, 220, 40),
    "purple": (140, 50, 170), "orange": (245, 140, 20), "cyan": (40, 210, 220), "pink": (250, 150, 190),
}  # fmt: skip

# The sandbox's reference namespace has few builtins (no sorted/sum/round) and runs the code with
# separate locals, so the programs below use plain loops and numpy methods only.
_LOAD = ("from PIL import Image as PILImage\n"
         "img = np.array(PILImage.open('{name}').convert('RGB')).astype(np.int32)\n")


def _pick_nearest(options: str, value: str) -> str:
    return (f"OPTS = {options}\nbest = ''\nbd = 1e18\n"
            "for letter, v in OPTS:\n"
            f"    d = float(((np.array(v, dtype=float) - np.array({value}, dtype=float)) ** 2).sum())\n"
            "    if d < bd:\n        bd = d\n        best = letter\nprint(best)\n")


def _options(prompt: str, pattern: str) -> list[tuple[str, str]]:
    return re.findall(rf"^([A-J])\. {pattern}$", prompt, re.M)


def _contrast(prompt: str) -> list[str] | None:
    if "faint bright round spots" not in prompt:
        return None
    enhance = (_LOAD.format(name="input_0.png") + "g = img[:, :, 0]\nspan = max(1, int(g.max() - g.min()))\n"
               "out = np.clip((g - g.min()) * 255.0 / span, 0, 255).astype(np.uint8)\n"
               "PILImage.fromarray(out).save(f'{PROCESSED_IMAGE_SAVE_PATH}/transformed_image_0.png')\n"
               "print('enhanced', int(g.min()), int(g.max()))\n")
    count = (_LOAD.format(name="input_0.png") + "g = img[:, :, 0]\nbg = np.median(g)\n"
             "mask = (g > bg + 3).astype(np.uint8)\n"
             "n, lab, stats, cent = cv2.connectedComponentsWithStats(mask, connectivity=8)\n"
             "print(int((stats[1:, cv2.CC_STAT_AREA] >= 20).sum()))\n")
    return [enhance, count]


def _visual_search(prompt: str) -> list[str] | None:
    m = re.search(r"divided into a (\d+)x\d+ grid of equal cells", prompt)
    if not m:
        return None
    return [_LOAD.format(name="input_0.png") + f"G = {int(m.group(1))}\n"
            "m = (img[:, :, 0] > 200) & (img[:, :, 1] < 60) & (img[:, :, 2] < 60)\n"
            "ys, xs = np.nonzero(m)\nH, W = m.shape\n"
            "print(int(ys.mean() * G / H) * G + int(xs.mean() * G / W) + 1)\n"]


def _spot_difference(prompt: str) -> list[str] | None:
    m = re.search(r"show a (\d+)x(\d+) grid of tiles", prompt)
    if not m:
        return None
    return [_LOAD.format(name="input_0.png") + "a = img\n" + _LOAD.format(name="input_1.png") + "b = img\n"
            f"R = {int(m.group(1))}\nC = {int(m.group(2))}\nth = a.shape[0] // R\ntw = a.shape[1] // C\nout = []\n"
            "for k in range(R * C):\n    r = k // C\n    c = k % C\n"
            "    d = np.abs(a[r*th:(r+1)*th, c*tw:(c+1)*tw] - b[r*th:(r+1)*th, c*tw:(c+1)*tw]).mean()\n"
            "    if d > 2:\n        out.append(str(k + 1))\nprint(', '.join(out))\n"]


def _jigsaw(prompt: str) -> list[str] | None:
    m = re.search(r"cut into a (\d+)x\d+ grid of pieces", prompt)
    if not m:
        return None
    return [_LOAD.format(name="input_0.png") + f"n = {int(m.group(1))}\np = img.shape[0] // n\nout = []\n"
            "for k in range(n * n):\n    r = k // n\n    c = k % n\n"
            "    piece = img[r*p:(r+1)*p, c*p:(c+1)*p]\n"
            "    col = int(piece[:, :, 0].mean() * n / 256.0)\n    row = int(piece[:, :, 1].mean() * n / 256.0)\n"
            "    out.append(str(row * n + col + 1))\nprint(', '.join(out))\n"]


def _maze(prompt: str) -> list[str] | None:
    m = re.search(r"grid of (\d+)-pixel squares", prompt)
    if not m:
        return None
    return [_LOAD.format(name="input_0.png") + f"B = {int(m.group(1))}\n"
            "cells = img[B // 2::B, B // 2::B]\nR, C = cells.shape[:2]\nfree = cells.sum(axis=2) > 100\n"
            "green = (cells[:, :, 1] > 150) & (cells[:, :, 0] < 100)\n"
            "red = (cells[:, :, 0] > 150) & (cells[:, :, 1] < 100)\n"
            "sy, sx = np.argwhere(green)[0]\ngy, gx = np.argwhere(red)[0]\n"
            "dist = np.full((R, C), -1)\ndist[sy, sx] = 0\nqueue = [(sy, sx)]\ni = 0\n"
            "while i < len(queue):\n    y, x = queue[i]\n    i += 1\n"
            "    for dy, dx in ((1, 0), (-1, 0), (0, 1), (0, -1)):\n        ny = y + dy\n        nx = x + dx\n"
            "        if 0 <= ny < R and 0 <= nx < C and free[ny, nx] and dist[ny, nx] < 0:\n"
            "            dist[ny, nx] = dist[y, x] + 1\n            queue.append((ny, nx))\n"
            "print(int(dist[gy, gx]))\n"]


def _proportion(prompt: str) -> list[str] | None:
    opts = _options(prompt, r"(\d+)%")
    if "percentage of the image area" not in prompt or not opts:
        return None
    table = [(letter, [float(v)]) for letter, v in opts]
    return [_LOAD.format(name="input_0.png") + "pct = 100.0 * (1 - (img.min(axis=2) > 250).mean())\n"
            "print('covered', pct)\n" + _pick_nearest(repr(table), "[pct]")]


def _colour(prompt: str) -> list[str] | None:
    opts = [(letter, name) for letter, name in _options(prompt, r"([a-z]+)") if name in COLOURS]
    if "Which colour covers the largest area" not in prompt or not opts:
        return None
    table = [(letter, list(COLOURS[name])) for letter, name in opts]
    return [_LOAD.format(name="input_0.png") +
            "cols, counts = np.unique(img.reshape(-1, 3), axis=0, return_counts=True)\n"
            "top = cols[counts.argmax()]\nprint('dominant', top.tolist())\n" + _pick_nearest(repr(table), "top")]


def _rotation(prompt: str) -> list[str] | None:
    opts = _options(prompt, r"(\d+) degrees")
    if "rotated clockwise to make it upright" not in prompt or not opts:
        return None
    table = [(letter, [float(v)]) for letter, v in opts]
    return [_LOAD.format(name="input_0.png") +
            "m = (img[:, :, 0] > 200) & (img[:, :, 1] < 60)\nys, xs = np.nonzero(m)\nH, W = m.shape\n"
            "top = ys.mean() < H / 2\nleft = xs.mean() < W / 2\n"
            "deg = 0 if (top and left) else (90 if left else (180 if not top else 270))\n"
            "print('restore', deg)\n" + _pick_nearest(repr(table), "[deg]")]


@dataclass(slots=True, frozen=True)
class Plan:
    """The programs that solve one recognised task, run in order; the last one's stdout answers."""

    task_type: str
    steps: list[str]


_PLANNERS: dict[str, Callable[[str], list[str] | None]] = {
    "contrast": _contrast, "visual_search": _visual_search, "spot_difference": _spot_difference,
    "jigsaw": _jigsaw, "maze": _maze, "proportion": _proportion, "color": _colour, "rotation_game": _rotation,
}  # fmt: skip


def plan_for(prompt: str) -> Plan | None:
    """The solving programs for a prompt, or None when no task type is recognised."""
    for task_type, planner in _PLANNERS.items():
        steps = planner(prompt)
        if steps:
            return Plan(task_type, steps)
    return None


def answer_from_tool_output(text: str) -> str | None:
    """The last printed line of a successful run, from the tool result the model saw."""
    try:
        view = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(view, dict) or view.get("ok") == "false" or not isinstance(view.get("stdout"), str):
        return None
    stdout: str = view["stdout"]
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    return lines[-1] if lines else None


def guess_answer(prompt: str, seed: object) -> str:
    """A plausible answer in the prompt's format, drawn without looking at the images."""
    rng = random.Random(f"guess|{seed}|{prompt}")
    letters: list[str] = re.findall(r"^([A-J])\. ", prompt, re.M)
    if letters:
        return rng.choice(letters)
    if m := re.search(r"cut into a (\d+)x\d+ grid of pieces", prompt):
        order = list(range(1, int(m.group(1)) ** 2 + 1))
        rng.shuffle(order)
        return ", ".join(map(str, order))
    if m := re.search(r"numbered 1 to (\d+)", prompt):
        top = int(m.group(1))
        if "tiles" in prompt:
            return ", ".join(map(str, sorted(rng.sample(range(1, top + 1), 2))))
        return str(rng.randint(1, top))
    if "maze" in prompt:
        return str(rng.randint(10, 60))
    return str(rng.randint(1, 10))


def _oracle_step(view: View, seed: object, n: int) -> Reply:
    plan = plan_for(view.user_text)
    if plan is None or TOOL not in view.tools:
        return answer(view, guess_answer(view.user_text, seed))
    results = [(text, images) for name, text, images in view.tool_results if name == TOOL]
    if results:
        text, images = results[-1]
        if answer_from_tool_output(text) is None:
            return answer(view, "The tool run failed, so I cannot tell.")
        # Every step but the last saves an image for the next; no image back means a broken path.
        if len(results) < len(plan.steps) and not images:
            return answer(view, "The tool returned no image, so I cannot tell.")
    if len(results) < len(plan.steps):
        return call(view, TOOL, {"code": plan.steps[len(results)]}, n)
    return answer(view, answer_from_tool_output(results[-1][0]) or "")


@register_policy("oracle")
def oracle_policy(model: SimModel, body: dict[str, object], n: int) -> Reply:
    """Solves tir-synth tasks with sandbox code and answers from what the tool printed."""
    return _oracle_step(read_conversation(body), body.get("seed"), n)


@register_policy("guess")
def guess_policy(model: SimModel, body: dict[str, object], n: int) -> Reply:
    """Answers tir-synth tasks at once, in the right format, without looking."""
    view = read_conversation(body)
    return answer(view, guess_answer(view.user_text, body.get("seed")))
