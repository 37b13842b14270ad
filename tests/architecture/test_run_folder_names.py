"""The run folder's file names are said once (``fasteval/runfolder/names.py``): no other module of
the package joins a path with one of them spelt out, so a rename cannot miss a reader."""

from __future__ import annotations

import ast
from pathlib import Path

from fasteval.runfolder import names

ROOT = Path(__file__).resolve().parents[2] / "fasteval"
NAMES = {v for k, v in vars(names).items() if k.isupper() and isinstance(v, str)}


def spelt_out(source: str) -> list[str]:
    """``x / "records.jsonl"``-style joins of a run folder name, as ``line: name``."""
    return [f"{node.lineno}: {node.right.value}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
            and isinstance(node.right, ast.Constant) and node.right.value in NAMES]


def test_the_names_module_holds_every_file_the_run_folder_doc_lists() -> None:
    assert NAMES >= {"records.jsonl", "manifest.json", "index.sqlite", "run.log", "blobs", "cache_keys.txt"}


def test_no_module_spells_out_a_run_folder_file_name() -> None:
    found = [f"{p.relative_to(ROOT.parent)}:{hit}" for p in sorted(ROOT.rglob("*.py")) if p.name != "names.py"
             for hit in spelt_out(p.read_text())]
    assert not found, "use fasteval.runfolder.names:\n" + "\n".join(found)


def test_the_check_sees_a_spelt_out_name() -> None:
    assert spelt_out('from pathlib import Path\nm = Path("r") / "manifest.json"\nb = Path("r") / BLOBS\n') == [
        "2: manifest.json"]
