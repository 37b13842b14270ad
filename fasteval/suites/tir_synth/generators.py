"""Procedural TIR-Bench-like items whose answers are known by construction.

Each generator takes a ``random.Random`` (seeded by the suite seed, the task type and the task
index) and returns a ``Synth``: PNG images, the prompt (which states the answer format), the
gold answer string in TIR-Bench's format and scoring metadata. Only numpy and pyvips are used,
so the same seed gives the same bytes on every machine.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyvips

if TYPE_CHECKING:  # numpy loads where an image is drawn: importing the suites (a report) needs none
    import numpy as np

LETTERS = "ABCD"

# Named colours for the colour task; the oracle knows the same names (world knowledge, not a key).
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30), "green": (30, 170, 60), "blue": (40, 70, 220), "yellow": (240, 220, 40),
    "purple": (140, 50, 170), "orange": (245, 140, 20), "cyan": (40, 210, 220), "pink": (250, 150, 190),
}  # fmt: skip


@dataclass(slots=True)
class Synth:
    """One generated item: images (PNG bytes), prompt, gold answer and scoring metadata."""

    images: list[bytes]
    prompt: str
    answer: str
    meta: dict[str, Any] = field(default_factory=dict)


def png(pixels: np.ndarray) -> bytes:
    """PNG bytes of an HxW (grey) or HxWx3 (RGB) uint8 array."""
    import numpy as np
    arr = np.ascontiguousarray(pixels, dtype=np.uint8)
    bands = 1 if arr.ndim == 2 else arr.shape[2]
    img = pyvips.Image.new_from_memory(arr.tobytes(), arr.shape[1], arr.shape[0], bands, "uchar")
    return bytes(img.pngsave_buffer(compression=1))


def _nrng(rng: random.Random) -> np.random.Generator:
    import numpy as np
    return np.random.default_rng(rng.randrange(2**32))


def _choices(rng: random.Random, correct: str, pool: list[str]) -> tuple[str, str]:
    """(options text "A. x\\nB. y...", letter of ``correct``) with the correct option at a random slot."""
    options = rng.sample([p for p in pool if p != correct], len(LETTERS) - 1)
    options.insert(rng.randrange(len(LETTERS)), correct)
    text = "\n".join(f"{letter}. {opt}" for letter, opt in zip(LETTERS, options, strict=True))
    return text, LETTERS[options.index(correct)]


def low_light(rng: random.Random) -> Synth:
    """Count faint bright spots in a nearly black photo (TIR-Bench 'contrast')."""
    import numpy as np
    nrng = _nrng(rng)
    h, w = 240, 320
    bg = rng.randint(2, 6)
    pixels = bg + nrng.integers(-1, 2, size=(h, w))
    count = rng.randint(3, 9)
    yy, xx = np.mgrid[0:h, 0:w]
    centres: list[tuple[int, int, int]] = []
    while len(centres) < count:
        r = rng.randint(6, 13)
        x, y = rng.randint(r + 2, w - r - 3), rng.randint(r + 2, h - r - 3)
        if all((x - a) ** 2 + (y - b) ** 2 > (r + c + 6) ** 2 for a, b, c in centres):
            centres.append((x, y, r))
            pixels[(xx - x) ** 2 + (yy - y) ** 2 <= r * r] = bg + rng.randint(7, 14)
    prompt = ("This photo was taken in very low light. How many faint bright round spots does it contain? "
              "Answer with an integer only.")
    return Synth([png(pixels)], prompt, str(count))


def visual_search(rng: random.Random) -> Synth:
    """Find the grid cell holding a tiny red marker in a large noisy image."""
    import numpy as np
    nrng = _nrng(rng)
    h, w = 1200, 1600
    g = rng.choice([4, 5, 6])
    grey = nrng.integers(40, 216, size=(h // 8, w // 8), dtype=np.uint8).repeat(8, 0).repeat(8, 1)
    pixels = np.stack([grey, grey, grey], axis=2)
    cell = rng.randrange(g * g)
    row, col = divmod(cell, g)
    ch, cw = h // g, w // g
    y = row * ch + rng.randint(10, ch - 20)
    x = col * cw + rng.randint(10, cw - 20)
    pixels[y:y + 8, x:x + 8] = (255, 0, 0)
    prompt = (f"The image is divided into a {g}x{g} grid of equal cells, numbered 1 to {g * g} in reading "
              "order (left to right, then top to bottom). Which cell contains the small pure red square? "
              "Answer with the cell number only.")
    return Synth([png(pixels)], prompt, str(cell + 1))


def spot_difference(rng: random.Random) -> Synth:
    """Two images of a grid of coloured tiles that differ in a few tiles; name those tiles."""
    import numpy as np
    nrng = _nrng(rng)
    rows, cols, side = rng.choice([(3, 4), (4, 4), (4, 5)]) + (60,)
    tiles = nrng.integers(30, 226, size=(rows, cols, 3))
    dots = nrng.integers(30, 226, size=(rows, cols, 3))
    changed = sorted(rng.sample(range(rows * cols), rng.randint(2, 4)))
    yy, xx = np.mgrid[0:side, 0:side]
    disc = (xx - side // 2) ** 2 + (yy - side // 2) ** 2 <= (side // 4) ** 2
    images = []
    for version in (0, 1):
        pixels = np.zeros((rows * side, cols * side, 3), dtype=np.uint8)
        for k in range(rows * cols):
            r, c = divmod(k, cols)
            tile = np.empty((side, side, 3), dtype=np.uint8)
            tile[:] = tiles[r, c]
            dot = dots[r, c] if not (version and k in changed) else (dots[r, c] + 100) % 256
            tile[disc] = dot
            pixels[r * side:(r + 1) * side, c * side:(c + 1) * side] = tile
        images.append(png(pixels))
    prompt = (f"The two images show a {rows}x{cols} grid of tiles, numbered 1 to {rows * cols} in reading "
              "order (left to right, then top to bottom). They are identical except for a few tiles. "
              "List the numbers of all tiles that differ, separated by commas (e.g. 2, 7).")
    return Synth(images, prompt, ", ".join(str(k + 1) for k in changed))


def jigsaw(rng: random.Random) -> Synth:
    """An n×n shuffle of a two-gradient image; the answer is the original piece at each position."""
    import numpy as np
    nrng = _nrng(rng)
    n = rng.choice([2, 3])
    size = 360
    ramp = np.linspace(0, 255, size)
    red = np.tile(ramp, (size, 1))
    green = red.T
    blue = nrng.integers(0, 256, size=(size // 12, size // 12)).repeat(12, 0).repeat(12, 1)
    original = np.stack([red, green, blue], axis=2).astype(np.uint8)
    order = list(range(n * n))
    while order == sorted(order):
        rng.shuffle(order)
    p = size // n
    pixels = np.zeros_like(original)
    for pos, piece in enumerate(order):
        (r, c), (pr, pc) = divmod(pos, n), divmod(piece, n)
        pixels[r * p:(r + 1) * p, c * p:(c + 1) * p] = original[pr * p:(pr + 1) * p, pc * p:(pc + 1) * p]
    prompt = (f"The image was cut into a {n}x{n} grid of pieces that were then shuffled. Number the pieces "
              f"1 to {n * n} by their position in the ORIGINAL image, in reading order. In the original, red "
              "increases from left to right and green from top to bottom. For each position of the shuffled "
              "image, in reading order, give the number of the piece found there, separated by commas "
              f"(e.g. {', '.join(str(k + 1) for k in range(n * n))} if nothing had moved).")
    return Synth([png(pixels)], prompt, ", ".join(str(k + 1) for k in order), {"difficulty": n})


def _carve(rng: random.Random, h: int, w: int) -> np.ndarray:
    """A perfect maze on (2h+1)x(2w+1) blocks by randomized depth-first search; True = corridor."""
    import numpy as np
    grid = np.zeros((2 * h + 1, 2 * w + 1), dtype=bool)
    stack = [(0, 0)]
    seen = {(0, 0)}
    grid[1, 1] = True
    while stack:
        r, c = stack[-1]
        nxt = [(r + dr, c + dc) for dr, dc in ((0, 1), (1, 0), (0, -1), (-1, 0))
               if 0 <= r + dr < h and 0 <= c + dc < w and (r + dr, c + dc) not in seen]
        if not nxt:
            stack.pop()
            continue
        nr, nc = rng.choice(nxt)
        grid[2 * nr + 1, 2 * nc + 1] = True
        grid[r + nr + 1, c + nc + 1] = True
        seen.add((nr, nc))
        stack.append((nr, nc))
    return grid


def shortest_moves(grid: np.ndarray, start: tuple[int, int], goal: tuple[int, int]) -> int:
    """Breadth-first distance in 4-neighbour moves over True cells."""
    dist = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        if (r, c) == goal:
            return dist[(r, c)]
        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= nr < grid.shape[0] and 0 <= nc < grid.shape[1] and grid[nr, nc] and (nr, nc) not in dist:
                dist[(nr, nc)] = dist[(r, c)] + 1
                queue.append((nr, nc))
    raise ValueError("goal unreachable")


def maze(rng: random.Random) -> Synth:
    """A block maze; the answer is the number of moves of the shortest path from green to red."""
    import numpy as np
    h, w, block = rng.randint(4, 8), rng.randint(4, 8), 16
    grid = _carve(rng, h, w)
    start, goal = (1, 1), (2 * h - 1, 2 * w - 1)
    if rng.random() < 0.5:
        start = (2 * h - 1, 1)
    pixels = np.where(grid[..., None], np.uint8(255), np.uint8(0)) * np.ones(3, dtype=np.uint8)
    pixels[start] = (0, 200, 0)
    pixels[goal] = (220, 0, 0)
    pixels = pixels.repeat(block, 0).repeat(block, 1)
    prompt = (f"The maze is drawn on a grid of {block}-pixel squares: walls are black, corridors white, the "
              "green square is the start and the red square the goal. Moving one square at a time up, down, "
              "left or right along corridors, how many moves does the shortest path from green to red take? "
              "Answer with an integer only.")
    return Synth([png(pixels)], prompt, str(shortest_moves(grid, start, goal)))


def proportion(rng: random.Random) -> Synth:
    """Share of the image covered by one filled shape, as a multiple-choice percentage."""
    import numpy as np
    h, w = 300, 400
    yy, xx = np.mgrid[0:h, 0:w]
    cx, cy = rng.randint(120, 280), rng.randint(90, 210)
    ax, ay = rng.randint(30, 115), rng.randint(30, 85)
    if rng.random() < 0.5:
        mask = ((xx - cx) / ax) ** 2 + ((yy - cy) / ay) ** 2 <= 1
    else:
        mask = (abs(xx - cx) <= ax) & (abs(yy - cy) <= ay)
    pixels = np.full((h, w, 3), 255, dtype=np.uint8)
    pixels[mask] = rng.choice(list(PALETTE.values()))
    pct = int(round(100 * mask.mean()))
    pool = [f"{v}%" for v in range(1, 100) if abs(v - pct) >= 8 and v % 3 == pct % 3]
    options, letter = _choices(rng, f"{pct}%", pool)
    prompt = ("What percentage of the image area does the coloured shape cover? Choose the closest option.\n"
              f"{options}\nAnswer with the option letter only.")
    return Synth([png(pixels)], prompt, letter)


def colour(rng: random.Random) -> Synth:
    """Which named colour covers the largest area (stripes of four colours)."""
    import numpy as np
    names = rng.sample(sorted(PALETTE), 4)
    w = 400
    while True:
        cuts = sorted(rng.sample(range(20, w - 20), 3))
        widths = [b - a for a, b in zip([0, *cuts], [*cuts, w], strict=True)]
        if min(widths) >= 20 and sorted(widths)[-1] >= 1.25 * sorted(widths)[-2]:
            break
    pixels = np.zeros((300, w, 3), dtype=np.uint8)
    left = 0
    for name, width in zip(names, widths, strict=True):
        pixels[:, left:left + width] = PALETTE[name]
        left += width
    pixels = np.roll(pixels, rng.randrange(w), axis=1)
    largest = names[widths.index(max(widths))]
    options, letter = _choices(rng, largest, [n for n in PALETTE if n != largest])
    prompt = f"Which colour covers the largest area of the image?\n{options}\nAnswer with the option letter only."
    return Synth([png(pixels)], prompt, letter)


def rotation(rng: random.Random) -> Synth:
    """A marked image turned by a multiple of 90°; the answer is the clockwise turn that restores it."""
    import numpy as np
    size = 240
    texture = _nrng(rng).integers(-30, 31, size=(size // 12, size // 12)).repeat(12, 0).repeat(12, 1)
    grey = np.clip(np.linspace(60, 190, size)[:, None] + texture, 0, 255).astype(np.uint8)
    pixels = np.stack([grey, grey, grey], axis=2)
    side, margin = rng.randint(24, 48), rng.randint(4, 16)
    pixels[margin:margin + side, margin:margin + side] = (220, 0, 0)
    turns = rng.randrange(4)
    pixels = np.rot90(pixels, k=turns)  # counter-clockwise by 90° * turns
    restore = f"{(turns * 90) % 360} degrees"
    options, letter = _choices(rng, restore, ["0 degrees", "90 degrees", "180 degrees", "270 degrees"])
    prompt = ("In the upright image a red square marks the top-left corner. By how many degrees must the "
              f"image be rotated clockwise to make it upright?\n{options}\nAnswer with the option letter only.")
    return Synth([png(pixels)], prompt, letter)


GENERATORS: dict[str, Callable[[random.Random], Synth]] = {
    "contrast": low_light,
    "visual_search": visual_search,
    "spot_difference": spot_difference,
    "jigsaw": jigsaw,
    "maze": maze,
    "proportion": proportion,
    "color": colour,
    "rotation_game": rotation,
}
"""Task type (TIR-Bench names where one exists) -> generator."""


def generate(task_type: str, seed: int, index: int) -> Synth:
    """The item ``index`` of ``task_type`` for ``seed``; deterministic across processes."""
    return GENERATORS[task_type](random.Random(f"tir-synth|{seed}|{task_type}|{index}"))
