"""``fasteval ctl RUN ...``: steer the sweep running in a run folder, through its control socket.

status, pause/resume (a model, a suite, an endpoint or everything; ``--now`` holds trajectories
before their next model request), set (limits, retries, the global concurrency), requeue
(this run's errors), drain and cancel. Every command takes ``--json``; every change lands in
the run folder's trace (``control.jsonl``). Exit 0 when the sweep did it, 2 when no sweep runs
there or it refused the command.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fasteval.cli.commands import HELP
from fasteval.cli.common import print_error
from fasteval.core.errors import ControlAnswerUnreadable, NoSweepRunning
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE, exit_code_for
from fasteval.core.terminal import clean
from fasteval.runfolder.control import ask

COMMANDS = ("status", "pause", "resume", "set", "requeue", "drain", "cancel")


def request_of(a: argparse.Namespace) -> dict[str, Any]:
    """The wire request of a parsed ``ctl`` (or ``slurm ctl``) command line."""
    req: dict[str, Any] = {"command": a.ctl_command}
    for key in ("model", "suite", "endpoint", "kind"):
        value = getattr(a, key, None)
        if value:
            req[key] = value
    for flag in ("now", "errors"):
        if getattr(a, flag, False):
            req[flag] = True
    if getattr(a, "global_", False):
        req["global"] = True
    if a.ctl_command == "set":
        req["values"] = parse_values(a.values)
    return req


def parse_values(pairs: list[str]) -> dict[str, str]:
    """``set``'s KEY=VALUE pairs; BadInput (exit 2) for one that is not."""
    from fasteval.core.errors import BadInput

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BadInput(f"{pair!r}: expected KEY=VALUE (e.g. rpm=30, concurrency=8, max_attempts=3)")
        out[key.strip()] = value.strip()
    return out


def cmd_ctl(a: argparse.Namespace) -> int:
    from fasteval.cli.common import print_json

    request = request_of(a)  # a malformed KEY=VALUE is a UsageError: one line, exit 2 (cli/main.py)
    try:
        answer = ask(Path(a.run_dir), request)
        lines = [] if a.json else readable_lines(Path(a.run_dir), answer)
    except (NoSweepRunning, ControlAnswerUnreadable) as e:
        if a.json:
            print_json({"ok": False, "running": isinstance(e, ControlAnswerUnreadable), "error": str(e)})
        else:
            print_error(e)
        return exit_code_for(e)
    if a.json:
        print_json(answer)
    else:
        for line in lines:
            print(line)
    return EXIT_OK if answer.get("ok") else EXIT_USAGE


def readable_lines(run_dir: Path, answer: dict[str, Any]) -> list[str]:
    """``answer_lines``, or ControlAnswerUnreadable when the answer lacks what they show (another version)."""
    try:
        return answer_lines(answer)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise ControlAnswerUnreadable(f"the sweep in {run_dir} answered without the fields this fasteval "
                                      f"shows ({type(e).__name__}: {e}): is it another fasteval version?") from None


def answer_lines(answer: dict[str, Any]) -> list[str]:
    """The human form of an answer; every value is the sweep's or a model's text: escaped."""
    if not answer.get("ok"):
        return [clean(f"refused: {answer.get('error')}")]
    if "status" in answer:
        return status_lines(answer)
    lines = [clean(f"{c.get('what')}: {c.get('old')} -> {c.get('new')}") for c in answer.get("changes") or []]
    for key in ("requeued", "cancelled"):
        if key in answer:
            lines.append(clean(f"{key} {answer[key]} jobs"))
    if lines and answer.get("lasts"):  # ``set``: how long the change holds
        lines.append(clean(f"({answer['lasts']})"))
    if answer.get("warning"):
        lines.append(clean(f"warning: {answer['warning']}"))
    return lines or ["no change"]


def status_lines(answer: dict[str, Any]) -> list[str]:
    st = answer["status"]
    j = st["jobs"]
    g = st["global"]
    out = [clean(f"sweep pid {answer.get('pid')} in {answer.get('run_dir')}")]
    starting = st.get("starting")
    if starting:  # the runtime is not open yet: no endpoint, no slot to show
        out += [clean(f"starting: {starting}"), f"jobs: {j['total']} planned, none started yet"]
    else:
        why = ", ".join(f"{n} {k}" for k, n in sorted((st.get("not_run") or {}).items()) if n)
        out += [f"jobs: {j['ok']} ok, {j['error']} error, {j['in_flight']} in flight, {j['waiting']} waiting, "
                f"{j['held']} held, {j['resumed']} resumed, {j['not_run']} not run{f' ({why})' if why else ''}, "
                f"of {j['total']}",
                f"global concurrency: {g['in_flight']}/{g['concurrency']}"]
    if st["paused"]:
        out.append(clean("paused: " + ", ".join(
            ("everything" if p["scope"] == "all" else f"{p['scope']} {p['name']}") + (" (now)" if p["now"] else "")
            for p in st["paused"])))
    if st["draining"] or st["cancelled"]:
        out.append(clean(f"draining: {', '.join(st['draining'])}  cancelled: {', '.join(st['cancelled'])}"))
    if st.get("limits_set"):
        out.append(clean("limits set (for this sweep; a resume starts from the config's): "
                         + ", ".join(f"{k}={'off' if v is None else v}" for k, v in st["limits_set"].items())))
    if not starting:
        out += _tables(st)
    trace = answer.get("trace") or []
    if trace:
        from fasteval.runfolder.control import trace_summary

        out.append("changes (control.jsonl):")
        out += [clean("  " + line) for line in trace_summary(trace).splitlines()]
    return out


def _tables(st: dict[str, Any]) -> list[str]:
    """Per model (what the ledger counts) and per endpoint (its limits and load)."""
    out = [f"{'model':<24} {'to run':>6} {'ok':>6} {'error':>6} {'flight':>6} {'waiting':>7} {'held':>6} "
           f"{'requeued':>8} {'not run':>7}"]
    for name, m in st["models"].items():
        out.append(clean(f"{name:<24} {m['to_run']:>6} {m['ok']:>6} {m['error']:>6} {m['in_flight']:>6} "
                         f"{m['waiting']:>7} {m['held']:>6} {m['requeued']:>8} {m['not_run']:>7}"))
    out.append(f"{'endpoint':<24} {'flight':>6} {'limit':>6} {'waiting':>7} {'rpm':>8} {'tpm':>8} {'attempts':>8} "
               f"{'requests':>8}  state")
    for name, e in st["endpoints"].items():
        out.append(clean(f"{name:<24} {e['in_flight']:>6} {e['concurrency']:>6} {e['waiting']:>7} "
                         f"{_num(e['rpm']):>8} {_num(e['tpm']):>8} {e['max_attempts']:>8} {e['requests']:>8}  "
                         f"{e['state']}"))
    return out


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def add_ctl_commands(p: argparse.ArgumentParser) -> None:
    """The ``ctl`` subcommands (shared by ``fasteval ctl`` and ``fasteval slurm ctl``)."""
    sub = p.add_subparsers(dest="ctl_command", required=True)

    def command(name: str, help_: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help_)
        c.add_argument("--json", action="store_true", help="the sweep's answer as JSON")
        return c

    command("status", "jobs done, in flight, waiting and held, per model and endpoint, with current limits")
    for name, help_ in (("pause", "start no new job of a model, suite, endpoint or everything"),
                        ("resume", "lift a pause (every pause without a scope); held jobs start")):
        c = command(name, help_)
        scope = c.add_mutually_exclusive_group()
        scope.add_argument("--model")
        scope.add_argument("--suite")
        scope.add_argument("--endpoint", help="a model's or a role's endpoint, by its name in the config")
        if name == "pause":
            c.add_argument("--now", action="store_true",
                           help="also hold trajectories in flight before their next model request")
    s = command("set", "change a model's or endpoint's concurrency, rpm, tpm, max_attempts, total_budget_s, "
                       "attempt_timeout_s, "
                       "or the run's global concurrency; effective at once")
    target = s.add_mutually_exclusive_group(required=True)
    target.add_argument("--model")
    target.add_argument("--endpoint")
    target.add_argument("--global", dest="global_", action="store_true", help="the run's global concurrency")
    s.add_argument("values", nargs="+", metavar="KEY=VALUE", help="e.g. rpm=30 concurrency=8 (rpm=off: no budget)")
    r = command("requeue", "run again now the jobs that ended in error in this run")
    r.add_argument("--errors", action="store_true", required=True)
    r.add_argument("--kind", help="only errors of this kind (e.g. transient, rate_limit, judge_error)")
    r.add_argument("--model")
    d = command("drain", "finish what is in flight, start nothing new, then end (exit 3: a rerun continues)")
    d.add_argument("--model", help="drain one model only: its servers stop after its last job")
    c = command("cancel", "stop a model's jobs now (no record; a later resume runs them)")
    c.add_argument("--model", required=True)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("ctl", help=HELP["ctl"])
    p.add_argument("run_dir")
    add_ctl_commands(p)
    p.set_defaults(func=cmd_ctl)
