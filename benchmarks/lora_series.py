"""A LoRA series on one server against one server per step, on real vLLM (the CPU build on a CPU node).

    python benchmarks/lora_series.py [--steps 3] [--tasks 8] [--base CHECKPOINT] [--json]

Not run in CI. The same training run evaluated twice with ``fasteval run``, in the same process
and on the same tasks (calculator questions):

* **one server per step**: the steps as full checkpoints (copies of the tiny calculator checkpoint,
  tests/tiny_models/calculator.py), a series of ``checkpoint-N`` folders: one ``vllm serve``
  start per step, as GPU scheduling runs them in turn;
* **LoRA series**: the steps as LoRA adapters of that checkpoint (rank 8 on q_proj and v_proj,
  written here as PEFT's files; B = 0, so every step answers as the base), ``checkpoints.glob``
  over them and the base in ``serve.model``: one start, every adapter on it
  (``--enable-lora --lora-modules``).

Prints the wall time of each, the server starts and their ratio. Exits 2 when vLLM is missing.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from providers.local.spec import find_vllm  # noqa: E402
from tests.tiny_models.calculator import ensure_checkpoint  # noqa: E402

VLLM_ARGS = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--max-model-len", "2048",
             "--max-num-seqs", "16", "--dtype", "float32"]


def write_safetensors(path: Path, tensors: dict[str, tuple[list[int], list[float]]]) -> None:
    """float32 tensors in the safetensors layout (an 8-byte header length, a JSON header, the data)."""
    header: dict[str, Any] = {}
    blobs: list[bytes] = []
    offset = 0
    for name, (shape, values) in tensors.items():
        data = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def lora_adapter(folder: Path, base: Path, seed: int, rank: int = 8) -> None:
    """A PEFT LoRA adapter of the tiny Qwen2 on q_proj and v_proj (B = 0: the base's answers)."""
    cfg = json.loads((base / "config.json").read_text())
    hidden, layers = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"])
    head_dim = hidden // int(cfg["num_attention_heads"])
    outs = {"q_proj": hidden, "v_proj": head_dim * int(cfg["num_key_value_heads"])}
    rng = random.Random(seed)
    tensors: dict[str, tuple[list[int], list[float]]] = {}
    for i in range(layers):
        for module, out in outs.items():
            prefix = f"base_model.model.model.layers.{i}.self_attn.{module}"
            tensors[f"{prefix}.lora_A.weight"] = ([rank, hidden], [rng.gauss(0, 0.02) for _ in range(rank * hidden)])
            tensors[f"{prefix}.lora_B.weight"] = ([out, rank], [0.0] * (out * rank))
    folder.mkdir(parents=True)
    write_safetensors(folder / "adapter_model.safetensors", tensors)
    (folder / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 2 * rank, "lora_dropout": 0.0,
        "target_modules": sorted(outs), "bias": "none", "base_model_name_or_path": str(base),
        "fan_in_fan_out": False, "modules_to_save": None, "use_rslora": False, "use_dora": False}))


def sweep(tmp: Path, name: str, serve: dict[str, Any], tasks: Path, checkpoints: dict[str, Any] | None) -> Path:
    entry: dict[str, Any] = {"name": "run", "provider": "vllm", "serve": serve,
                             "params": {"temperature": 0.0, "max_tokens": 48}}
    if checkpoints:
        entry["checkpoints"] = checkpoints
    cfg = {"seeds": 1, "models": [entry], "suites": [{"name": "jsonl", "options": {"path": str(tasks), "max_rounds": 3}}],
           "run": {"max_concurrency": 8}}
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def timed_run(config: Path, run_dir: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fasteval.cli.main", "run", str(config), "--run-dir", str(run_dir),
                           "--no-progress", "--no-preflight"], capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{config.name}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    recs = [orjson.loads(x) for x in (run_dir / "records.jsonl").read_bytes().splitlines() if x.strip()]
    starts = sum(p.read_text().count("=== fasteval: start") for p in (run_dir / "servers").glob("*.log"))
    return {"wall_s": round(wall, 1), "jobs": len(recs), "ok": sum(r["status"] == "ok" for r in recs),
            "server_starts": starts, "mean_score": round(sum(float(r.get("score") or 0) for r in recs) / len(recs), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--base", help="the base checkpoint (default: the tiny calculator one, built if missing)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    vllm = find_vllm()
    if vllm is None:
        print("no vllm binary (not on PATH, no .venv-vllm/bin/vllm): run `make vllm`", file=sys.stderr)
        return 2
    base = Path(a.base) if a.base else ensure_checkpoint(str(Path(vllm).with_name("python")))
    tmp = Path(tempfile.mkdtemp(prefix="fasteval-lora-"))
    try:
        tasks = tmp / "tasks.jsonl"
        tasks.write_text("".join(orjson.dumps({"id": f"c{i}", "prompt": f"What is {10 + i} + {3 + i}?",
                                                "answer": str(13 + 2 * i), "tools": ["calculator"]}).decode() + "\n"
                                 for i in range(a.tasks)))
        files = [p for p in base.iterdir() if p.is_file() and p.name not in ("DONE", "recipe.json")]
        for step in range(1, a.steps + 1):
            folder = tmp / "full" / f"checkpoint-{step}"
            folder.mkdir(parents=True)
            for f in files:
                shutil.copy2(f, folder / f.name)
            lora_adapter(tmp / "lora" / f"checkpoint-{step}", base, seed=step)
        serve = {"command": [vllm], "args": VLLM_ARGS, "startup_timeout_s": 900, "kv_cache_gib": 1}
        per_step = timed_run(sweep(tmp, "per-step", {**serve, "model": str(tmp / "full" / "checkpoint-*")}, tasks,
                                   None), tmp / "run-per-step")
        lora_serve = {**serve, "model": str(base), "args": [*VLLM_ARGS, "--max-loras", str(a.steps),
                                                            "--max-lora-rank", "8"]}
        lora = timed_run(sweep(tmp, "lora", lora_serve, tasks, {"glob": str(tmp / "lora" / "checkpoint-*")}),
                         tmp / "run-lora")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = {"steps": a.steps, "tasks_per_step": a.tasks, "one_server_per_step": per_step, "lora_one_server": lora,
           "saved_s": round(per_step["wall_s"] - lora["wall_s"], 1),
           "ratio": round(per_step["wall_s"] / lora["wall_s"], 2) if lora["wall_s"] else None}
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        for label, r in (("one server per step", per_step), ("LoRA series, one server", lora)):
            print(f"{label:26s} {r['wall_s']:7.1f} s  {r['server_starts']} start(s)  {r['ok']}/{r['jobs']} ok  "
                  f"mean score {r['mean_score']}")
        print(f"saved {out['saved_s']} s over {a.steps} steps ({out['ratio']}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
