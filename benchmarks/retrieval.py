"""Page-text extraction: speed and quality of the three extractors on generated pages.

``.venv/bin/python benchmarks/retrieval.py`` prints ms/page, recall of the article's sentences and
the share of boilerplate (nav, sidebar, comments, footer, script) in the output; ``main`` should
keep recall at 1.0 with the least noise, ``chrome`` is the VisualToolBench reference's recipe.
"""

from __future__ import annotations

import random
import re
import sys
import time
from pathlib import Path

# Run as a script: the repo root must win over benchmarks/ (which has its own sandbox.py, cache.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fasteval.tools.retrieval.page import EXTRACTORS, extract_text  # noqa: E402

WORDS = "alpha beta gamma delta river mountain station museum bridge harbor festival bakery archive orbit".split()


def _sentence(rng: random.Random, tag: str) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(12)) + f" {tag}{rng.randrange(10**6)}."


def page(seed: int, paragraphs: int = 40) -> str:
    rng = random.Random(seed)
    s = _sentence
    nav = "".join(f'<li><a href="/x{i}">{s(rng, "NAV")}</a></li>' for i in range(30))
    side = "".join(f'<p><a href="/s{i}">{s(rng, "SIDE")}</a></p>' for i in range(20))
    main = "".join("<p>" + " ".join(s(rng, "MAIN") for _ in range(4)) + "</p>" for _ in range(paragraphs))
    comments = "".join(f"<div class=c><p>{s(rng, 'CMT')}</p></div>" for _ in range(10))
    return (f"<html><head><title>T{seed}</title><script>var x='{s(rng, 'JS')}';</script></head><body>"
            f"<header><ul>{nav}</ul></header><div><aside>{side}</aside><article><h1>Headline</h1>{main}"
            f"</article><div class='comments'>{comments}</div></div><footer>{s(rng, 'FOOT')}</footer></body></html>")


def main() -> None:
    pages = [page(i) for i in range(50)]
    print(f"{len(pages)} pages, {sum(map(len, pages)) / len(pages) / 1024:.0f} KiB each")
    for name in EXTRACTORS:
        t0 = time.perf_counter()
        texts = [extract_text(h, name).text for h in pages]
        ms = (time.perf_counter() - t0) / len(pages) * 1000
        recall, noise = [], []
        for html, text in zip(pages, texts, strict=True):
            want = set(re.findall(r"MAIN\d+", html))
            tags = re.findall(r"(MAIN|NAV|SIDE|CMT|FOOT|JS)\d+", text)
            recall.append(len(want & set(re.findall(r"MAIN\d+", text))) / len(want))
            noise.append(sum(t != "MAIN" for t in tags) / max(1, len(tags)))
        print(f"{name:9s} {ms:6.2f} ms/page  recall {sum(recall) / len(recall):.3f}  "
              f"boilerplate {sum(noise) / len(noise):.3f}")


if __name__ == "__main__":
    main()
