"""Model text parsed on the event loop costs time linear in its length (issue 30, item 11).

A 126 KB Mini-o3 reply of unclosed ``<grounding>`` tags stalled a whole sweep for 8 s; the
tag regexes of ten answer extractors took 1-1.6 s per 30 KB; Mini-o3's reference call regex
and VisualProbe's strict score were worse than quadratic. Two checks, neither a stopwatch:
no pattern of the parsing layers keeps the lazy ``(.*?)`` idiom, and every parser of model
text reads adversarial 200 KB replies in a child process whose CPU time is capped far above
what linear parsing needs (minutes of it were needed before).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import resource
import subprocess
import sys
import textwrap

import pytest

_LAYERS = ("fasteval.engine", "fasteval.suites", "fasteval.tools")


def _patterns() -> list[tuple[str, str]]:
    out = []
    for pkg in _LAYERS:
        for info in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + "."):
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                values = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else [value]
                out += [(f"{info.name}.{name}", v.pattern) for v in values
                        if isinstance(v, re.Pattern) and isinstance(v.pattern, str)]
    return out


def test_no_pattern_reads_tagged_text_with_a_lazy_dot_star() -> None:
    """``<x>(.*?)</x>`` rescans the rest of the reply from every unclosed ``<x>``: use core.tagged."""
    found = _patterns()
    assert len(found) > 30  # the walk reached the suites
    bad = [(where, p) for where, p in found if ".*?" in p or "(.*)" in p or "[^)]*" in p]
    assert bad == []


_PARSE_ALL = textwrap.dedent('''
    from fasteval.engine.run.agent import parse_text_tool_call
    from fasteval.suites.mcq.matching import answer_span, fixed_choice, lmms_eval_letter
    from fasteval.suites.scorers.judged import read_verdict
    from fasteval.suites.scorers.numeric import read_numbers, reference_number
    from fasteval.suites.scorers.reading import Normalise
    from fasteval.suites.mme_realworld.scoring import vlmevalkit_letter
    from fasteval.suites.treebench.boxes import lenient_boxes, vlmevalkit_iou
    from fasteval.suites.treebench.scoring import reference_letter
    from fasteval.suites.vistahop.scoring import extract_answer, parse_judge_verdict
    from fasteval.suites.visualprobe.judge import fixed_answer, fixed_reading, reference_answer, reference_reading
    from fasteval.suites.visualtoolbench.judge import JudgeParseError, parse_verdict
    from fasteval.suites.visualtoolbench.metrics import classify_image_ops
    from fasteval.suites.vstar.deepeyes import pred_ans
    from fasteval.tools.retrieval.text_search import strip_think
    from fasteval.tools.text_protocols import DeepEyesProtocol, DeepEyesTexts, MiniO3Protocol, MiniO3Texts

    size = 200_000
    units = ["<grounding>", '<grounding>{"bbox_2d": [0.1,', "<answer>", "<tool_call>", "<think>", "<box>",
             "score:" + " " * 1000, "convertScaleAbs(", "```", "answer is ", "(A) ", " ", "<judge>",
             "1,000,", "0.5 kg ", "- 1.5e", "verdict: ", "Reason: "]
    mini = [MiniO3Protocol(f, MiniO3Texts("s", lambda a, o: "", lambda e: e)) for f in ("reference", "fixed")]
    deep = DeepEyesProtocol("reference", DeepEyesTexts("s", "f"))
    options = {"A": "a", "B": "b", "C": "c", "D": "d"}
    for unit in units:
        for text in ((unit * (size // len(unit) + 1))[:size], (unit * (size // len(unit)))[:size - 13] + "</grounding>"):
            for p in mini:
                p.parse(text)
            deep.parse(text)
            parse_text_tool_call(text)
            answer_span(text); fixed_choice(text, options); lmms_eval_letter(text)
            vlmevalkit_letter(text); lenient_boxes(text, "auto", 100, 100); vlmevalkit_iou(text, [(0, 0, 1, 1)])
            reference_letter("vlmevalkit", text, "A"); extract_answer(text); parse_judge_verdict(text)
            fixed_answer(text); fixed_reading(text); reference_answer([text]); reference_reading(text)
            classify_image_ops(text); pred_ans(text); strip_think(text)
            read_numbers(text); reference_number(text); read_verdict(text, True); Normalise(ignore_articles=True,
                                                                                           ignore_punctuation=True)(text)
            try:
                parse_verdict(text)
            except JudgeParseError:  # a reply with no JSON: the judge is asked again
                pass
    print("parsed", len(units) * 2, "replies of", size, "characters")
''')


def _cap_cpu() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (120, 120))


@pytest.mark.slow
def test_every_parser_reads_adversarial_200kb_replies_within_a_cpu_cap() -> None:
    """Linear parsing needs a few CPU seconds here; the patterns we replaced needed minutes to hours."""
    done = subprocess.run([sys.executable, "-c", _PARSE_ALL], capture_output=True, text=True,
                          preexec_fn=_cap_cpu, check=False)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "parsed 36 replies" in done.stdout
