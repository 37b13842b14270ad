"""``fasteval slurm ctl RUN ...``: one ``fasteval ctl`` command sent to every running shard, answers gathered.

Each shard is a sweep with its own run folder (``RUN/shards/<i>``) and its own control socket. A Unix
socket only reaches processes on its own machine, so a shard is asked directly when its socket
answers here (the same node, or no Slurm at all), and otherwise, when Slurm says it is running,
through ``srun --jobid=<its job> --overlap`` on its node: Slurm's own authentication carries the
request, and nothing listens on the network.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from fasteval.cli.ctl import add_ctl_commands, readable_lines, request_of
from fasteval.core.errors import BadInput, ControlAnswerUnreadable, NoSweepRunning
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE
from fasteval.core.terminal import clean
from fasteval.runfolder.control import ask
from fasteval.slurm.cluster import Cluster, SlurmError
from fasteval.slurm.scripts import SubmitOptions
from fasteval.slurm.state import read_jobs, shard_dirs, slurm_dir

SRUN_TIMEOUT_S = 60.0


def argv_of(request: dict[str, Any]) -> list[str]:
    """The ``fasteval ctl`` arguments that send ``request`` (for a shard reached through srun)."""
    out = [str(request["command"])]
    for key in ("model", "suite", "endpoint", "kind"):
        if request.get(key):
            out += [f"--{key}", str(request[key])]
    for flag in ("now", "errors", "global"):
        if request.get(flag):
            out.append(f"--{flag}")
    out += [f"{k}={v}" for k, v in (request.get("values") or {}).items()]
    return [*out, "--json"]


def _through_srun(job_id: str, shard: Path, request: dict[str, Any]) -> dict[str, Any]:
    """Ask a shard on its own node: ``srun --overlap`` runs the client beside the sweep."""
    cmd = ["srun", f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1", "--quiet",
           sys.executable, "-m", "fasteval.cli.main", "ctl", str(shard), *argv_of(request)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SRUN_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NoSweepRunning(f"srun to job {job_id} failed: {e}") from None
    try:
        answer = orjson.loads(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else b"")
    except (orjson.JSONDecodeError, IndexError):
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        raise NoSweepRunning(f"srun to job {job_id}: {tail[-1] if tail else f'exit {proc.returncode}'}") from None
    if not isinstance(answer, dict):
        raise NoSweepRunning(f"srun to job {job_id}: not an answer")
    if answer.get("running") is False:
        raise NoSweepRunning(str(answer.get("error")))
    return answer


def _running_jobs(run_dir: Path, jobs: dict[str, Any], shards: int) -> dict[int, str]:
    """Shard -> Slurm job id of the shards Slurm says are running (none when Slurm is not here)."""
    subs = jobs.get("submissions") or []
    ids = [s["array_job_id"] for s in subs if s.get("array_job_id")]
    cluster = Cluster(timeout_s=30)
    if not ids or not cluster.available():
        return {}
    try:
        states = cluster.states(ids)
    except SlurmError:
        return {}
    out: dict[int, str] = {}
    for sub in subs:
        aid = sub.get("array_job_id")
        for i in sub.get("tasks") or range(shards):
            st = states.get(f"{aid}_{i}")
            if aid and st is not None and st.state == "RUNNING":
                out[i] = f"{aid}_{i}"
    return out


def gather(run_dir: Path, request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every shard's answer (or why it gave none), in shard order."""
    jobs = read_jobs(run_dir)  # DamagedRunFolder for one fasteval did not write
    if jobs is None:
        raise BadInput(f"{run_dir} has no Slurm submission ({slurm_dir(run_dir) / 'jobs.json'})")
    shards = SubmitOptions.from_json(jobs["options"]).shards
    running = _running_jobs(run_dir, jobs, shards)
    rows: list[dict[str, Any]] = []
    for i, shard in enumerate(shard_dirs(run_dir, shards)):
        row: dict[str, Any] = {"shard": i, "run_dir": str(shard), "job_id": running.get(i)}
        try:
            try:
                row["answer"] = ask(shard, request)
            except NoSweepRunning:
                if i not in running:
                    raise
                row["answer"] = _through_srun(running[i], shard, request)  # on another node
            row["running"] = True
        except (NoSweepRunning, ControlAnswerUnreadable) as e:
            row.update(running=False, error=str(e))
        rows.append(row)
    return rows


def cmd_slurm_ctl(a: argparse.Namespace) -> int:
    """A malformed KEY=VALUE or a folder with no submission is a UsageError (one line, exit 2, in
    cli/main.py); anything else is a bug of ours (exit 70 with its trace)."""
    rows = gather(Path(a.run_dir), request_of(a))
    if a.json:
        sys.stdout.write(orjson.dumps({"shards": rows}, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")
    else:
        for row in rows:
            if not row["running"]:
                print(clean(f"shard {row['shard']}: not running ({row['error']})"))
                continue
            print(f"shard {row['shard']}:")
            try:
                lines = readable_lines(Path(row["run_dir"]), row["answer"])
            except ControlAnswerUnreadable as e:
                lines = [clean(f"error: {e}")]
                row["answer"] = {"ok": False}
            for line in lines:
                print("  " + line)
    answered = [r for r in rows if r["running"]]
    if not answered:
        print(f"error: no shard of {clean(a.run_dir)} is running", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK if all(r["answer"].get("ok") for r in answered) else EXIT_USAGE


def add_slurm_ctl(ssub: Any) -> None:
    p = ssub.add_parser("ctl", help="send a `fasteval ctl` command to every running shard and gather the answers")
    p.add_argument("run_dir")
    add_ctl_commands(p)
    p.set_defaults(func=cmd_slurm_ctl)
