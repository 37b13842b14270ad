"""``fasteval slurm submit|status|resume|merge``: a sweep as a Slurm job array, safe to rerun."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from fasteval.cli.commands import HELP
from fasteval.cli.common import private_run_files
from fasteval.config.load import load_config
from fasteval.core.errors import BadInput, ConfigError, DamagedRunFolder
from fasteval.core.exitcodes import EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE
from fasteval.core.terminal import clean
from fasteval.engine.plan import default_run_dir
from fasteval.runfolder.names import MANIFEST
from fasteval.slurm.cluster import ACTIVE, Cluster, SlurmError
from fasteval.slurm.recorded import UntrustedJobs, trusted_options
from fasteval.slurm.scripts import SubmitOptions, array_script, merge_script, submit_args, validate
from fasteval.slurm.state import (
    jobs_file,
    last_log_line,
    merge_shards,
    read_jobs,
    shard_dirs,
    shard_progress,
    slurm_dir,
    write_jobs,
)


def _err(msg: str, code: int = EXIT_USAGE) -> int:
    print(f"error: {clean(msg)}", file=sys.stderr)
    return code


def _write_scripts(o: SubmitOptions) -> tuple[Path, Path]:
    d = slurm_dir(o.run_dir)
    (d / "logs").mkdir(parents=True, exist_ok=True)
    array, merge = d / "array.sbatch", d / "merge.sbatch"
    array.write_text(array_script(o))
    merge.write_text(merge_script(o))
    return array, merge


def _submit(cluster: Cluster, o: SubmitOptions, tasks: list[int] | None, jobs: dict[str, Any]) -> dict[str, Any]:
    """Submit the array (all shards or ``tasks``) and a merge that waits for it; record both."""
    array, merge = _write_scripts(o)
    sub: dict[str, Any] = {"at": datetime.now(UTC).isoformat(), "tasks": tasks}
    if tasks is None or tasks:
        extra = [f"--array={','.join(map(str, tasks))}"] if tasks else []
        sub["array_job_id"] = cluster.submit(str(array), *submit_args(o, "array"), *extra)
        dep = [f"--dependency=afterok:{sub['array_job_id']}", "--kill-on-invalid-dep=yes"]
    else:
        dep = []
    sub["merge_job_id"] = cluster.submit(str(merge), *submit_args(o, "merge"), *dep)
    jobs.setdefault("submissions", []).append(sub)
    write_jobs(o.run_dir, jobs)
    return sub


def cmd_submit(a: argparse.Namespace) -> int:
    """Private like ``fasteval run`` (0700/0600, sbatch passes the umask on to the logs) unless
    ``--shared-run-dir``."""
    with private_run_files(a.shared_run_dir):
        return _cmd_submit(a)


def _cmd_submit(a: argparse.Namespace) -> int:
    try:
        cfg = load_config(a.config)
    except ConfigError as e:  # ours only: a bug is an internal error (cli/main.py), never "fix your config"
        return _err(str(e))
    if a.shards < 1:
        return _err("--shards must be at least 1")
    run_dir = Path(a.run_dir) if a.run_dir else default_run_dir(a.config)
    o = SubmitOptions(config=Path(a.config), run_dir=run_dir, shards=a.shards, shard_by=a.shard_by,
                      partition=a.partition, time=a.time, gpus_per_shard=a.gpus_per_shard,
                      cpus_per_shard=a.cpus_per_shard, mem=a.mem, account=a.account, qos=a.qos,
                      sbatch_args=list(a.sbatch_arg or []), signal_grace_s=a.signal_grace, requeue=not a.no_requeue,
                      shared_run_dir=a.shared_run_dir)
    try:
        validate(o)
    except BadInput as e:
        return _err(str(e))
    if o.shard_by == "model" and o.shards > len(cfg.models):
        return _err(f"--shard-by model with {o.shards} shards but the config has {len(cfg.models)} models")
    old = read_jobs(run_dir)
    if old and old.get("submissions"):
        ids = ", ".join(str(s.get("array_job_id") or s.get("merge_job_id")) for s in old["submissions"])
        return _err(f"{run_dir} already has submitted jobs ({ids}); use `fasteval slurm resume {run_dir}`")
    array, merge = _write_scripts(o)
    if a.dry_run:
        arr = shlex.join(["sbatch", "--parsable", *submit_args(o, "array"), str(array)])
        mrg = shlex.join(["sbatch", "--parsable", *submit_args(o, "merge"), str(merge)])
        print(clean(arr))
        print(clean(mrg.replace(" --parsable ", " --parsable --dependency=afterok:<array job id> "
                                                "--kill-on-invalid-dep=yes ", 1)))
        return EXIT_OK
    cluster = Cluster()
    jobs: dict[str, Any] = {"options": o.to_json()}
    try:
        sub = _submit(cluster, o, None, jobs)
    except SlurmError as e:
        return _err(str(e))
    print(f"submitted array job {sub['array_job_id']} ({o.shards} shards) and merge job {sub['merge_job_id']}; "
          f"follow with `fasteval slurm status {run_dir}`")
    return EXIT_OK


def _shard_states(cluster: Cluster, jobs: dict[str, Any], shards: int) -> dict[int, tuple[str, str | None]]:
    """Each shard's latest Slurm state and job id (its most recent submission)."""
    subs = jobs.get("submissions") or []
    ids = [s["array_job_id"] for s in subs if s.get("array_job_id")]
    states = cluster.states(ids) if ids else {}
    out: dict[int, tuple[str, str | None]] = {}
    for sub in subs:
        aid = sub.get("array_job_id")
        if not aid:
            continue
        for i in sub.get("tasks") or range(shards):
            st = states.get(f"{aid}_{i}")
            out[i] = (st.state if st else "UNKNOWN", f"{aid}_{i}")
    return out


def _status(run_dir: Path) -> dict[str, Any]:
    jobs = read_jobs(run_dir)
    if jobs is None:
        raise FileNotFoundError(f"{run_dir} has no Slurm submission ({slurm_dir(run_dir) / 'jobs.json'})")
    o = SubmitOptions.from_json(jobs["options"])
    cluster = Cluster()
    states = _shard_states(cluster, jobs, o.shards)
    rows = []
    for i, shard in enumerate(shard_dirs(run_dir, o.shards)):
        state, job_id = states.get(i, ("NOT_SUBMITTED", None))
        rows.append({"shard": i, "slurm_state": state, "job_id": job_id, **shard_progress(shard),
                     "last_log_line": last_log_line(slurm_dir(run_dir) / "logs" / f"shard-{i}.log")})
    merge_id = (jobs.get("submissions") or [{}])[-1].get("merge_job_id")
    merge_state = cluster.states([merge_id]).get(merge_id) if merge_id else None
    merged = (run_dir / MANIFEST).exists()
    return {"run_dir": str(run_dir), "shards": rows,
            "merge": {"job_id": merge_id, "slurm_state": merge_state.state if merge_state else None, "merged": merged}}


def cmd_status(a: argparse.Namespace) -> int:
    try:
        st = _status(Path(a.run_dir))
    except (FileNotFoundError, SlurmError) as e:
        return _err(str(e))
    if a.format == "json":
        sys.stdout.write(orjson.dumps(st, option=orjson.OPT_INDENT_2).decode() + "\n")
        return EXIT_OK
    for line in status_lines(st):
        print(line)
    return EXIT_OK


def status_lines(st: dict[str, Any]) -> list[str]:
    """The table form of ``slurm status``; a log's last line is the shard's words: escaped."""
    out = []
    for r in st["shards"]:
        prog = f"{r['done']} done, {r['error']} error of {r['total']}" if r["started"] else "not started"
        out.append(clean(f"shard {r['shard']}: {r['slurm_state']:<12} {prog}  {r['last_log_line'] or ''}"))
    m = st["merge"]
    out.append(clean(f"merge: {m['slurm_state'] or '-'} (job {m['job_id']}), "
                     f"{'merged' if m['merged'] else 'not merged yet'}"))
    return out


def _complete(progress: dict[str, Any]) -> bool:
    return bool(progress["started"]) and progress["remaining"] == 0 and progress["total"] is not None


def cmd_resume(a: argparse.Namespace) -> int:
    run_dir = Path(a.run_dir)
    try:
        jobs = read_jobs(run_dir)
    except DamagedRunFolder as e:
        return _err(f"not resuming: {e}")
    if jobs is None:
        return _err(f"{run_dir} has no Slurm submission; start with `fasteval slurm submit CONFIG --run-dir {run_dir}`")
    try:
        o = trusted_options(run_dir, jobs_file(run_dir), jobs, a.python)
        if a.time:
            o.time = a.time
            validate(o)
    except (UntrustedJobs, BadInput) as e:
        return _err(f"not resuming: {e}")
    jobs["options"] = o.to_json()
    with private_run_files(o.shared_run_dir):
        return _resubmit(a, run_dir, o, jobs)


def _resubmit(a: argparse.Namespace, run_dir: Path, o: SubmitOptions, jobs: dict[str, Any]) -> int:
    cluster = Cluster()
    try:
        states = _shard_states(cluster, jobs, o.shards)
        running = {i: s for i, s in states.items() if s[0] in ACTIVE}
        if running:
            desc = ", ".join(f"shard {i} ({s[1]} {s[0]})" for i, s in sorted(running.items()))
            return _err(f"still running: {desc}; wait for it or scancel it, then resume", EXIT_INCOMPLETE)
        todo = [i for i, d in enumerate(shard_dirs(run_dir, o.shards)) if not _complete(shard_progress(d))]
        old_merge = (jobs.get("submissions") or [{}])[-1].get("merge_job_id")
        if old_merge:
            cluster.cancel(old_merge)  # a merge waiting on a failed array can never run
        if not todo and (run_dir / MANIFEST).exists() and not a.merge:
            print(f"{run_dir}: every shard is complete and merged; nothing to do")
            return EXIT_OK
        sub = _submit(cluster, o, todo, jobs)
    except SlurmError as e:
        return _err(str(e))
    what = f"shards {', '.join(map(str, todo))} as array job {sub['array_job_id']}" if todo else "no shard"
    print(f"resubmitted {what}; merge job {sub['merge_job_id']}")
    return EXIT_OK


def cmd_merge(a: argparse.Namespace) -> int:
    run_dir = Path(a.run_dir)
    jobs = read_jobs(run_dir)
    if jobs is None:
        return _err(f"{run_dir} has no Slurm submission")
    o = SubmitOptions.from_json(jobs["options"])
    from fasteval.runfolder.lock import run_folder_lock

    with private_run_files(o.shared_run_dir), contextlib.ExitStack() as held:
        for folder in (run_dir, *shard_dirs(run_dir, o.shards)):  # a shard still running is not merged
            if folder.is_dir():
                held.enter_context(run_folder_lock(folder, "slurm merge"))
        return _merge(run_dir, o)


def _merge(run_dir: Path, o: SubmitOptions) -> int:
    try:
        counts = merge_shards(run_dir, o.shards)
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        return _err(str(e), EXIT_INCOMPLETE)
    from fasteval.view.report import report

    (run_dir / "report.json").write_bytes(orjson.dumps(report(run_dir), option=orjson.OPT_INDENT_2))
    print(f"{run_dir}: merged {counts['records']} records from {o.shards} shards; report in {run_dir / 'report.json'}")
    return EXIT_OK


def add_parser(sub: Any) -> None:
    """Register ``fasteval slurm ...`` (fasteval.cli.main's COMMAND_MODULES)."""
    s = sub.add_parser("slurm", help=HELP["slurm"])
    ssub = s.add_subparsers(dest="slurm_command", required=True)
    p = ssub.add_parser("submit", help="write and submit the array and merge scripts")
    p.add_argument("config")
    p.add_argument("--run-dir")
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--shard-by", choices=["job", "model"], default="job",
                   help="job: spread jobs by hash (API sweeps); model: whole models per task (a checkpoint per node)")
    p.add_argument("--partition")
    p.add_argument("--time", help="time limit per shard, Slurm syntax (e.g. 04:00:00)")
    p.add_argument("--gpus-per-shard", type=int)
    p.add_argument("--cpus-per-shard", type=int)
    p.add_argument("--mem")
    p.add_argument("--account")
    p.add_argument("--qos")
    p.add_argument("--sbatch-arg", action="append", help="an extra #SBATCH line, e.g. --sbatch-arg=--constraint=a100")
    p.add_argument("--signal-grace", type=int, default=120,
                   help="seconds before the time limit at which Slurm warns fasteval (SIGTERM) to stop cleanly")
    p.add_argument("--no-requeue", action="store_true", help="do not ask Slurm to requeue pre-empted shards")
    p.add_argument("--dry-run", action="store_true", help="write the scripts and print the sbatch commands only")
    p.add_argument("--shared-run-dir", action="store_true",
                   help="create the run folder, shards and logs with your umask instead of 0700 with 0600 files")
    p.set_defaults(func=cmd_submit)
    from fasteval.cli.slurm_ctl import add_slurm_ctl

    add_slurm_ctl(ssub)
    st = ssub.add_parser("status", help="per shard: Slurm state, done/error/total, last log line")
    st.add_argument("run_dir")
    st.add_argument("--format", choices=["table", "json"], default="table")
    st.set_defaults(func=cmd_status)
    r = ssub.add_parser("resume", help="resubmit the shards that are not complete, then the merge")
    r.add_argument("run_dir")
    r.add_argument("--time", help="a new time limit for the resubmitted shards")
    r.add_argument("--merge", action="store_true", help="merge again even if RUN is already merged")
    r.add_argument("--python", help="the interpreter the shards run (when it is not the one running resume); "
                                    "it replaces the one in RUN/slurm/jobs.json")
    r.set_defaults(func=cmd_resume)
    m = ssub.add_parser("merge", help="merge the shards into RUN (what the merge job runs)")
    m.add_argument("run_dir")
    m.set_defaults(func=cmd_merge)
