"""The Slurm batch scripts and ``slurm resume`` against hostile names and a tampered jobs.json.

No cluster needed: the scripts are run by a real ``bash`` with the variables Slurm would set, and
the interpreter they name is a recorder script that writes down the argv it received. A run
folder named ``my eval``, ``$(…)`` or with backticks must reach fasteval as one path and run
nothing; a newline in any ``#SBATCH`` value is refused; resume refuses a jobs.json it cannot trust.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fasteval.cli.main import main
from fasteval.slurm.scripts import SubmitOptions, array_script, merge_script, submit_args
from fasteval.slurm.state import jobs_file, read_jobs, write_jobs

HOSTILE_DIRS = ["my eval", "x$(touch PWNED)y", "b`touch PWNED`q", "q'uote\"d & ;|<>*?", "pct%a%j"]


def _recorder(folder: Path) -> Path:
    """An 'interpreter' that records its arguments, one per line (NUL-free, exact), and exits 0."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "python rec"
    exe.write_text('#!/bin/bash\nfor a in "$@"; do printf "%s\\0" "$a"; done > "$FE_ARGV_OUT"\n')
    exe.chmod(0o755)
    return exe


def _run_script(script: str, tmp: Path, task: int) -> list[str]:
    path = tmp / "job.sbatch"
    path.write_text(script)
    out = tmp / "argv"
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": str(task), "SLURM_JOB_ID": "7", "FE_ARGV_OUT": str(out)}
    proc = subprocess.run(["bash", str(path)], cwd=tmp, env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return out.read_bytes().decode().split("\0")[:-1]


def _config(folder: Path, name: str = "sweep.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump({"seeds": 1, "models": [{"name": "sim-a", "provider": "sim"}],
                                    "suites": [{"name": "demo", "options": {"n_tasks": 2}}]}))
    return path


@pytest.mark.parametrize("name", HOSTILE_DIRS)
def test_the_array_script_hands_a_hostile_run_dir_over_as_one_path(tmp_path: Path, name: str) -> None:
    work = tmp_path / "w $(touch PWNED)"
    work.mkdir()
    run = tmp_path / name
    cfg = _config(tmp_path / "cfg `touch PWNED` dir")
    o = SubmitOptions(config=cfg, run_dir=run, shards=3, workdir=work, python=str(_recorder(tmp_path / "bin x")))
    argv = _run_script(array_script(o), tmp_path, 1)
    assert argv == ["-m", "fasteval.cli.main", "run", str(cfg.resolve()), "--run-dir", f"{run.resolve()}/shards/1",
                    "--shard", "1/3", "--shard-by", "job", "--no-progress"]
    assert not list(tmp_path.rglob("PWNED")), "a run folder's name ran as a command"


def test_the_merge_script_hands_a_hostile_run_dir_over_as_one_path(tmp_path: Path) -> None:
    run = tmp_path / "a b$(touch PWNED)`touch PWNED`"
    o = SubmitOptions(config=_config(tmp_path), run_dir=run, workdir=tmp_path,
                      python=str(_recorder(tmp_path / "bin")))
    assert _run_script(merge_script(o), tmp_path, 0) == ["-m", "fasteval.cli.main", "slurm", "merge",
                                                         str(run.resolve())]
    assert not list(tmp_path.rglob("PWNED"))


def test_the_log_path_goes_to_sbatch_whole_with_percent_escaped(tmp_path: Path) -> None:
    o = SubmitOptions(config=_config(tmp_path), run_dir=tmp_path / "my eval 100%", workdir=tmp_path)
    (arg,) = submit_args(o, "array")
    assert arg == f"--output={tmp_path.resolve()}/my eval 100%%/slurm/logs/shard-%a.log"
    assert "#SBATCH --output" not in array_script(o)  # an #SBATCH line would be split at the space


@pytest.mark.parametrize("flag", ["--partition", "--sbatch-arg", "--time", "--account", "--qos", "--mem"])
def test_a_newline_in_an_sbatch_value_is_refused(tmp_path: Path, flag: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path)
    value = "--x=1\necho INJECTED" if flag == "--sbatch-arg" else "gpu\necho INJECTED"
    run = tmp_path / "run"
    code = main(["slurm", "submit", str(cfg), "--run-dir", str(run), f"{flag}={value}", "--dry-run"])
    assert code == 2
    assert "control character" in capsys.readouterr().err
    assert not (run / "slurm" / "array.sbatch").exists()


def test_a_config_name_with_a_newline_cannot_inject_a_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path, "evil\n#SBATCH --wrap=x\necho INJECTED.yaml")
    run = tmp_path / "run"
    code = main(["slurm", "submit", str(cfg), "--run-dir", str(run), "--dry-run"])
    assert code == 2 and "control character" in capsys.readouterr().err
    o = SubmitOptions(config=tmp_path / "my eval [1].yaml", run_dir=run, workdir=tmp_path)
    head = array_script(o).splitlines()[1]
    assert head == "#SBATCH --job-name=fasteval-my_eval__1_"


def _submitted(tmp_path: Path) -> Path:
    """A run folder whose jobs.json says what a real submit would have written."""
    run = tmp_path / "run"
    (run / "slurm").mkdir(parents=True)
    o = SubmitOptions(config=_config(tmp_path), run_dir=run, shards=2, workdir=tmp_path)
    write_jobs(run, {"options": o.to_json(), "submissions": [{"array_job_id": "11", "merge_job_id": "12",
                                                              "tasks": None}]})
    return run


def _tamper(run: Path, **changes: object) -> None:
    jobs = read_jobs(run)
    assert jobs is not None
    jobs["options"].update(changes)
    write_jobs(run, jobs)


@pytest.mark.parametrize(("change", "message"), [
    ({"python": "/bin/sh"}, "names the interpreter /bin/sh"),
    ({"python": "relative/python"}, "not an existing executable"),
    ({"workdir": "/nonexistent/fasteval-workdir"}, "is not an existing absolute folder"),
    ({"run_dir": "/tmp/elsewhere"}, "was written for the run folder /tmp/elsewhere"),
    ({"sbatch_args": ["--x=1\nrm -rf ~"]}, "control character"),
    ({"shards": "3"}, "options.shards is str"),
    ({"requeue": 1}, "options.requeue is int"),
    ({"shared_run_dir": "yes"}, "options.shared_run_dir is not a bool"),
])
def test_resume_refuses_a_tampered_jobs_json(tmp_path: Path, change: dict[str, object], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    run = _submitted(tmp_path)
    _tamper(run, **change)
    assert main(["slurm", "resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert "not resuming" in err and message in err, err
    assert not (run / "slurm" / "array.sbatch").exists()  # refused before any script was written


def test_resume_refuses_a_jobs_json_others_can_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _submitted(tmp_path)
    jobs_file(run).chmod(0o666)
    assert main(["slurm", "resume", str(run)]) == 2
    assert "writable by others" in capsys.readouterr().err
    jobs_file(run).chmod(0o600)
    (run / "slurm").chmod(0o777)
    assert main(["slurm", "resume", str(run)]) == 2
    assert "writable by others" in capsys.readouterr().err


def test_resume_takes_another_interpreter_only_when_named(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    run = _submitted(tmp_path)
    other = _recorder(tmp_path / "venv2")
    _tamper(run, python=str(other))
    assert main(["slurm", "resume", str(run)]) == 2
    assert f"--python {other}" in capsys.readouterr().err
    from fasteval.slurm.recorded import trusted_options

    o = trusted_options(run, jobs_file(run), read_jobs(run), str(other))
    assert o.python == str(other)
    assert trusted_options(run, jobs_file(run), {**(read_jobs(run) or {}), "options": {
        **(read_jobs(run) or {})["options"], "python": sys.executable}}).python == sys.executable


def test_slurm_status_escapes_the_last_log_line(tmp_path: Path) -> None:
    from fasteval.cli.slurm import status_lines
    from fasteval.slurm.state import last_log_line

    log = tmp_path / "shard-0.log"
    log.write_bytes(b"starting\n\x1b]0;pwned\x07\x1b[2J\x1b]52;c;aGk=\x07done \xc2\x9b31m\n")
    last = last_log_line(log)
    st = {"shards": [{"shard": 0, "slurm_state": "RUNNING", "started": False, "last_log_line": last}],
          "merge": {"slurm_state": None, "job_id": None, "merged": False}}
    lines = status_lines(st)
    assert lines[0].endswith("\\x1b]0;pwned\\x07\\x1b[2J\\x1b]52;c;aGk=\\x07done \\x9b31m")
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for line in lines for c in line)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.parametrize("shared", [False, True])
def test_submit_makes_the_run_folder_private_unless_shared(tmp_path: Path, shared: bool) -> None:
    """Like ``fasteval run``: the run folder, its scripts and (through the umask sbatch passes on
    and the scripts' own ``umask 077``) the shards and logs are 0700/0600 unless --shared-run-dir."""
    cfg = _config(tmp_path)
    run = tmp_path / "run"
    old = os.umask(0o022)
    try:
        code = main(["slurm", "submit", str(cfg), "--run-dir", str(run), "--dry-run",
                     *(["--shared-run-dir"] if shared else [])])
        assert os.umask(0o022) == 0o022  # restored after the command
    finally:
        os.umask(old)
    assert code == 0
    array = run / "slurm" / "array.sbatch"
    folder, file = (0o755, 0o644) if shared else (0o700, 0o600)
    assert (_mode(run), _mode(run / "slurm" / "logs"), _mode(array)) == (folder, folder, file)
    script = array.read_text()
    merge = (run / "slurm" / "merge.sbatch").read_text()
    assert ("umask 077" in script, "umask 077" in merge) == (not shared, not shared)
    rec = _recorder(tmp_path / "bin")
    o = SubmitOptions(config=cfg, run_dir=run, workdir=tmp_path, python=str(rec), shared_run_dir=shared)
    argv = _run_script(array_script(o), tmp_path, 0)
    assert ("--shared-run-dir" in argv) == shared
