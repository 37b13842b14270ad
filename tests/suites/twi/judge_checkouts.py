"""Synthetic checkouts of the HR-Bench repository, lmms-eval and VLMEvalKit's MME-RealWorld CN texts:
the references' layout and symbols, with placeholder strings of our own (never their texts).

Each Python file starts with ``raise SystemExit`` so a loader that imported or ran it would fail.
"""

from __future__ import annotations

from pathlib import Path

from reference_repos import NEVER_RUN, _git


def write_hrbench(root: Path) -> Path:
    """``hrbench/``: the fork's ImageMCQDataset.build_prompt and utils/hrbench.py's judge texts."""
    ds = root / "hrbench" / "vlmeval" / "dataset"
    (ds / "utils").mkdir(parents=True, exist_ok=True)
    (ds / "image_mcq.py").write_text(NEVER_RUN + '''class ImageMCQDataset:
    def build_prompt(self, line):
        question = line['question']
        options_prompt = 'SYNTH-HR-Options:\\n'
        for key, item in options.items():
            options_prompt += f'{key}: {item}\\n'
        prompt = ''
        if hint is not None:
            prompt += f'SYNTH-HR-Hint: {hint}\\n'
        prompt += f'SYNTH-HR-Question: {question}\\n'
        if len(options):
            prompt += options_prompt
            prompt += 'SYNTH-HR pick one. \\n'
        return prompt
''')
    (ds / "utils" / "hrbench.py").write_text(NEVER_RUN + '''def build_prompt(line):
    options_prompt = 'OPTS\\n'
    for key, item in options.items():
        options_prompt += f'{key}) {item}\\n'
    prompt = ''
    prompt += f'Q<<{question}>>\\n'
    if len(options):
        prompt += options_prompt
        prompt += 'SYNTH-HR-JUDGE one is right. \\n'
    prediction = line['prediction']
    ground_truth = f'{label}. {gt_text}'
    content = f"BLOCK<<{prompt}>> GOLD<<{ground_truth}>> PRED<<{prediction}>>?"
    return content


def pipeline_eval(prompts, model):
    for prompt in prompts:
        inp = "SYNTH-HR-JUDGE say yes or no. {}".format(prompt)
        inp_list.append(inp)
''')
    _git(root)
    return root


def write_lmms_eval(root: Path) -> Path:
    """``lmms_eval/tasks/hrbench/``: ``hrbench_doc_to_text`` and ``HRBenchEval.build_prompt``."""
    task = root / "lmms_eval" / "tasks" / "hrbench"
    task.mkdir(parents=True, exist_ok=True)
    (task / "utils.py").write_text(NEVER_RUN + '''def hrbench_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    question = doc["question"].strip()
    options_prompt = ""
    for key, item in options.items():
        options_prompt += f"{key}= {item}\\n"
    prompt = ""
    prompt += f"{question}\\n{options_prompt}SYNTH-LMMS letter only."
    return prompt
''')
    (task / "hrbench_evals.py").write_text(NEVER_RUN + '''class HRBenchEval:
    def build_prompt(self, question, options, prediction):
        options_prompt = ""
        for key, item in options.items():
            options_prompt += f"{key}. {item}\\n"
        tmpl = (
            "SYNTH-LMMS-JUDGE which option, or Z. \\n"
            "Q: {}\\nO: {}A: {}\\nOut: "
        )
        return tmpl.format(question, options_prompt, prediction)
''')
    _git(root)
    return root


def write_vlmevalkit_cn(root: Path) -> Path:
    """VLMEvalKit's MMERealWorld with the CN entry of SYS and the conditional header in generate_tsv."""
    ds = root / "vlmeval" / "dataset"
    ds.mkdir(parents=True, exist_ok=True)
    (ds / "image_mcq.py").write_text(NEVER_RUN + '''class MMERealWorld:
    SYS = {
        'MME-RealWorld': 'SYNTH-MME pick A-E.',
        'MME-RealWorld-Lite': 'SYNTH-MME-LITE pick A-E.',
        'MME-RealWorld-CN': 'SYNTH-中文 只答字母。\\n答案：',
    }

    def load_data(self, dataset="MME-RealWorld"):
        def generate_tsv(pth):
            for item in data:
                choice_prompt = (
                    "SYNTH english header:\\n"
                    if dataset in ["MME-RealWorld", "MME-RealWorld-Lite"]
                    else "SYNTH-选项:\\n"
                )
        if dataset == "MME-RealWorld-Lite":
            choice_prompt = "SYNTH lite header:\\n"
        return choice_prompt
''')
    _git(root)
    return root
