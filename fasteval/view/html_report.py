"""``fasteval report RUN --html OUT.html``: the summary as one self-contained file.

The file is the live viewer's summary page (same templates, same numbers, same inline SVG
plots, CSS and script inlined) plus, with ``--examples N``, N trajectories per model whose
images are embedded as data URIs. Images are shrunk when large and stop being embedded once
the file's image budget is spent, so the report stays small enough to attach to a message.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path

from fasteval.core.errors import UnsafeRunFolder
from fasteval.runfolder.blobs import read_blob
from fasteval.runfolder.names import BLOBS
from fasteval.view.data import RunSet, sniff_image_type
from fasteval.view.pages import layout, summary_body
from fasteval.view.trajectory import job_body

MAX_IMAGE_BYTES = 200_000
"""An image above this is re-encoded as a JPEG thumbnail before being embedded."""
THUMB_PX = 768
DEFAULT_IMAGE_BUDGET = 8_000_000
"""All embedded images of one report together (bytes before base64)."""


@dataclass(slots=True)
class ImageEmbedder:
    """Turns image references into data URIs until the budget is spent (then None)."""

    blobs: Path
    budget: int
    used: int = 0
    embedded: int = 0
    left_out: int = 0
    refused: int = 0
    """References that are not blobs of this run (a path, a link out of the store): never embedded."""

    def __call__(self, ref: str) -> str | None:
        try:
            data = read_blob(self.blobs, ref)  # a hash, and a file of the store, never a link out of it
        except FileNotFoundError:
            self.left_out += 1
            return None
        except (OSError, ValueError, UnsafeRunFolder):
            self.refused += 1
            return None
        if len(data) > MAX_IMAGE_BYTES:
            data = _thumbnail(data) or data
        if self.used + len(data) > self.budget:
            self.left_out += 1
            return None
        self.used += len(data)
        self.embedded += 1
        return f"data:{sniff_image_type(data[:16])};base64,{base64.b64encode(data).decode()}"


def _thumbnail(data: bytes) -> bytes | None:
    import pyvips

    try:
        img = pyvips.Image.thumbnail_buffer(data, THUMB_PX)
        if img.hasalpha():
            img = img.flatten(background=[255, 255, 255])
        out: bytes = img.jpegsave_buffer(Q=80)
        return out
    except pyvips.Error:
        return None


def render_report(run_dir: Path, examples: int = 0, image_budget: int = DEFAULT_IMAGE_BUDGET) -> str:
    runs = RunSet([run_dir])
    run = next(iter(runs.runs.values()))
    body = [summary_body(runs.summary(), live=False)]
    if examples > 0:
        embed = ImageEmbedder(run_dir / BLOBS, image_budget)
        body.append(f"<h1>Example trajectories ({examples} per model)</h1>")
        for job in runs.example_jobs(run.name, examples):
            body.append(f'<section class="example">{job_body(job, embed, live=False)}</section>')
        body.append(f'<p class="meta">{embed.embedded} images embedded ({embed.used // 1000} KB)'
                    + (f"; {embed.left_out} left out over the {image_budget // 1_000_000} MB cap" if embed.left_out
                       else "")
                    + (f"; {embed.refused} refused (not an image of this run's blob store)" if embed.refused else "")
                    + "</p>")
    return layout(f"fasteval report: {run.name}", "".join(body), nav=False)


def write_report(run_dir: Path, out: Path, examples: int = 0, image_budget: int = DEFAULT_IMAGE_BUDGET) -> int:
    """Write the report through a temp file and rename, so a half-written report never exists."""
    html = render_report(run_dir, examples, image_budget)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, out)
    return len(html.encode())
