"""Small fixture copies of the three reference repositories: the same layout and symbols as the
public harnesses, with synthetic strings (never the references' own texts).

Each Python file starts with ``raise SystemExit`` so a loader that imported or ran it would fail:
texts must be read with ``ast`` only. Each repository has a minimal ``.git`` (HEAD -> a branch ->
FIXTURE_COMMIT) so the recorded commit can be checked.
"""

from __future__ import annotations

from pathlib import Path

FIXTURE_COMMIT = "0123456789abcdef0123456789abcdef01234567"
NEVER_RUN = 'raise SystemExit("fixture: this file must be parsed, never executed")\n\n'
TIR_TASKS = ("jigsaw", "color", "maze", "math", "symbolic", "word_search", "rotation_game",
             "spot_difference", "visual_search", "refcoco", "contrast", "instrument")


def _git(root: Path) -> None:
    git = root / ".git"
    (git / "refs" / "heads").mkdir(parents=True, exist_ok=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs" / "heads" / "main").write_text(FIXTURE_COMMIT + "\n")


def write_tirbench(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    demos = "".join(f'demo_prompt_{t} = """\nSYNTH-DEMO {t}: Q/R/E triples for {{n}} pieces\n"""\n\n' for t in TIR_TASKS)
    (root / "demo_prompts.py").write_text(NEVER_RUN + demos)
    (root / "extract_answer.py").write_text(NEVER_RUN + '''from demo_prompts import demo_prompt_maze


def create_test_prompt(demo_prompt, query, response):
    demo_prompt = demo_prompt.strip()
    test_prompt = f"SYNTH-Q<<{query}>>\\n\\nSYNTH-R<<{response}>>"
    full_prompt = f"{demo_prompt}\\n\\n{test_prompt}\\n\\nSYNTH-EXTRACTED: "
    return full_prompt


def get_response_text(model, text, api_key, base_url):
    client = make_client(api_key, base_url)
    response = client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": [{"type": "text", "text": " SYNTH extractor system line."}]},
            {"role": "user", "content": [{"type": "text", "text": text}]},
        ],
    )
    return response.choices[0].message.content
''')
    _git(root)
    return root


def write_visualtoolbench(root: Path) -> Path:
    scripts = root / "scripts"
    scripts.mkdir(parents=True, exist_ok=True)
    (scripts / "prompt.py").write_text(NEVER_RUN + '''system_prompt_low = "SYNTH low prompt."
system_prompt_mid = """SYNTH mid prompt.
1. step"""
system_prompt_high = "SYNTH high prompt: " + "be proactive."
''')
    tools = [("python_image_processing", None), ("python_interpreter", "SYNTH interpreter."),
             ("google_search", "SYNTH search the web."), ("browser_get_page_text", "SYNTH fetch a page."),
             ("historical_weather", "SYNTH weather."), ("calculator", "SYNTH calculator.")]
    entries = []
    for name, desc in tools:
        if desc is None:
            description = ('(\n                        "SYNTH image tool.\\n"\n'
                           '                        f"files: {image_list}; save to {processed_image_save_path}"\n'
                           '                        f" as {processed_image_save_path}/transformed_image_{{i}}.png"\n'
                           '                    )')
        else:
            description = repr(desc)
        entries.append(f'''            {{
                "type": "function",
                "function": {{
                    "name": "{name}",
                    "description": {description},
                    "parameters": {{"type": "object", "properties": {{"x{name}": {{"type": "string"}}}},
                                   "required": ["x{name}"]}},
                }},
            }},''')
    (scripts / "tools.py").write_text(NEVER_RUN + '''class VisionTools:
    """Synthetic stand-in for the reference tool collection."""

    @staticmethod
    def get_tools(image_list, processed_image_save_path):
        tools = [
''' + "\n".join(entries) + '''
        ]
        return tools
''')
    (scripts / "run_judge_single_turn.py").write_text(NEVER_RUN + '''class LLM_Judge:
    def LLMasJudge(self, question, golden_answer, model_answer, rubric_criteria):
        prompt = f"""
        SYNTH judge. Q={question} G={golden_answer} C={rubric_criteria} A={model_answer}
        Reply {{"explanation": "...", "judge_result": "Met" or "Not Met"}}
        """
        return prompt
''')
    _git(root)
    return root


def write_vistahop(root: Path) -> Path:
    ev = root / "evaluation"
    ev.mkdir(parents=True, exist_ok=True)
    (ev / "tools.yaml").write_text('''tools:
  - tool_schema:
      type: function
      function:
        name: image_zoom_in_tool
        description: "SYNTH zoom."
        parameters:
          type: object
          properties:
            bbox_2d: {type: array, items: {type: number}}
          required: [bbox_2d]
  - tool_schema:
      type: function
      function:
        name: text_search_tool
        description: "SYNTH text search."
        parameters:
          type: object
          properties:
            query: {type: string}
          required: [query]
  - tool_schema:
      type: function
      function:
        name: image_search_tool
        description: "SYNTH image search."
        parameters: {type: object, properties: {}, required: []}
''')
    (ev / "run_vistahop_eval.py").write_text(NEVER_RUN + '''LLM_JUDGE_SYSTEM_PROMPT = """SYNTH judge system. Output <judge>Yes/No</judge>."""

LLM_JUDGE_USER_PROMPT = """SYNTH Q: {question}
SYNTH GT: {ground_truth}
SYNTH R: {model_response}"""


def load_tool_config(tool_config_path):
    tool_def_str = "\\n".join([])
    tools_section = f"""# SYNTH Tools
<tools>
{tool_def_str}
</tools>
SYNTH call format: {{"name": <function-name>, "arguments": <args-json-object>}}"""
    return tools_section


async def evaluate_tool(client, tool_name, args, ok, search_result, image_counter, title_list):
    def save_image_for_html(img, img_type):
        tool_response = "inner function: not in evaluate_tool's scope"
        return tool_response

    tool_response = ""
    if tool_name == "image_zoom_in_tool":
        if ok:
            tool_response = f"<tool_response>\\nSYNTH zoomed [IMAGE {image_counter}]\\n</tool_response>"
        else:
            tool_response = "<tool_response>\\nError: SYNTH bad bbox.\\n</tool_response>"
    elif tool_name == "text_search_tool":
        if ok:
            tool_response = f"<tool_response>\\n{search_result}\\n</tool_response>"
        else:
            tool_response = "<tool_response>\\nError: SYNTH search off.\\n</tool_response>"
    elif tool_name == "image_search_tool":
        if ok:
            if title_list:
                tool_response = "<tool_response>\\nSYNTH results:"
                tool_response += "more"
            else:
                tool_response = "<tool_response>\\nSYNTH nothing found.\\n</tool_response>"
        else:
            tool_response = "<tool_response>\\nSYNTH nothing found.\\n</tool_response>"
    else:
        tool_response = f"<tool_response>\\nError: SYNTH unknown '{tool_name}'.\\n</tool_response>"
    return tool_response
''')
    _git(root)
    return root


def write_vlmevalkit(root: Path) -> Path:
    """VLMEvalKit's judge templates (``build_prompt`` / ``build_prompt_cn``), positional fields."""
    utils = root / "vlmeval" / "dataset" / "utils"
    utils.mkdir(parents=True, exist_ok=True)
    (utils / "multiple_choice.py").write_text(NEVER_RUN + '''def build_prompt(question, options, prediction):
    tmpl = (
        'SYNTH-MCQ-JUDGE match the answer to an option, or Z. \\n'
        'Question: {}?\\nOptions: {}\\nAnswer: {}\\nYour output: '
    )
    return tmpl.format(question, options, prediction)


def build_prompt_cn(question, options, prediction):
    tmpl = (
        'SYNTH-MCQ-JUDGE-CN 问题: {}?\\n选项: {}\\n答案: {}\\n输出: '
    )
    return tmpl.format(question, options, prediction)
''')
    (root / "vlmeval" / "dataset" / "image_mcq.py").write_text(NEVER_RUN + '''class ImageMCQDataset:
    def build_prompt(self, line):
        question = line['question']
        options_prompt = 'SYNTH-Options:\\n'
        for key, item in options.items():
            options_prompt += f'{key}) {item}\\n'
        prompt = ''
        if hint is not None:
            prompt += f'SYNTH-Hint: {hint}\\n'
        prompt += f'SYNTH-Question: {question}\\n'
        if len(options):
            prompt += options_prompt
            prompt += 'SYNTH-MCQ pick one option. \\n'
        return prompt


class MMERealWorld:
    SYS = {
        'MME-RealWorld': 'SYNTH-MME pick A-E. \\nSYNTH best:',
        'MME-RealWorld-Lite': 'SYNTH-MME-LITE pick A-E.',
        'MME-RealWorld-CN': 'SYNTH-MME-CN',
    }

    def load_data(self, dataset="MME-RealWorld"):
        if dataset == "MME-RealWorld-Lite":
            choice_prompt = "SYNTH choices:\\n"
        return choice_prompt


class TreeBench:
    def build_prompt(self, line):
        options_prompt = 'SYNTH-Options:\\n'
        for key, item in options.items():
            options_prompt += f'{key}) {item}\\n'
        prompt = ''
        if hint is not None:
            prompt += f'SYNTH-Hint: {hint}\\n'
        prompt += f'SYNTH-Question: {question}\\n'
        if len(options):
            prompt += options_prompt
            prompt += "SYNTH-TREE letter only. \\n"
        return prompt
''')
    _git(root)
    return root


def write_mini_o3(root: Path) -> Path:
    """Mini-o3's answer judge texts (``SYSTEM_PROMPT``, ``QUERY_PROMPT`` with format fields)."""
    rs = root / "verl" / "utils" / "reward_score"
    rs.mkdir(parents=True, exist_ok=True)
    (rs / "general_qa_tool.py").write_text(NEVER_RUN + '''SYSTEM_PROMPT = "SYNTH-PROBE-SYSTEM grade the answer."

QUERY_PROMPT = """SYNTH-PROBE Q={question}
GT={ground_truth}
PRED={prediction}
The format should be "Score: 0 or 1\"""
''')
    _git(root)
    return root


def write_deepeyes(root: Path) -> Path:
    """DeepEyes' V* judge texts (``eval/judge_result.py``): template, seven examples, test block."""
    ev = root / "eval"
    ev.mkdir(parents=True, exist_ok=True)
    examples = "".join(f'''    example_{i} = """
SYNTH-EYES example {i}
Judgement: {i % 2}
"""
''' for i in range(1, 8))
    (ev / "judge_result.py").write_text(NEVER_RUN + '''def get_chat_template():
    chat_template = """
SYNTH-EYES-JUDGE decide 1 or 0.\\n\\n
"""
    return chat_template


def get_gpt4_score_ICE():
''' + examples + '''    return [example_1, example_2, example_3, example_4, example_5, example_6, example_7]


def get_prompt(predict_str, ground_truth, question):
    test_prompt = f"""
[Q]: {question}
[Std]: {ground_truth}
[Pred] : {predict_str}
Judgement:"""
    return test_prompt


def process(line):
    chat_response = client.chat.completions.create(
        model=eval_model_name,
        messages=[
            {"role": "system", "content": "SYNTH-EYES system."},
            {"role": "user", "content": full_prompt},
        ],
        temperature=0.0,
    )
''')
    _git(root)
    return root


def write_treevgr(root: Path) -> Path:
    """TreeVGR's TreeBench prompt (``inference_treebench.py``, ``eval_model_row``)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "inference_treebench.py").write_text(NEVER_RUN + '''def eval_model_row(item):
    if item["category"] == "OCR":
        qs = item["question"]
    else:
        qs = item["question"] + " SYNTH-Opts:\\n" + item["multi-choice options"]
    content = [
        {"type": "image_url", "image_url": "x"},
        {"type": "text", "text": qs + "\\nSYNTH-TREEVGR answer in tags."},
    ]
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "SYNTH-TREEVGR system."}]},
        {"role": "user", "content": content},
    ]
    return messages
''')
    _git(root)
    return root


def write_lmms_eval(root: Path, post_prompt: str = "\\nSYNTH-LMMS letter only.") -> Path:
    """lmms-eval's V* task (``vstar_bench.yaml`` including ``_default_template_yaml``) with the
    ``!function`` tags its YAML files carry and synthetic pre/post prompts."""
    task = root / "lmms_eval" / "tasks" / "vstar_bench"
    task.mkdir(parents=True, exist_ok=True)
    (task / "_default_template_yaml").write_text(f'''dataset_path: synthetic/vstar
doc_to_visual: !function utils.vstar_doc_to_visual
doc_to_text: !function utils.vstar_doc_to_text
generation_kwargs:
  max_new_tokens: 16
  temperature: 0
  top_p: 1.0
process_results: !function utils.vstar_process_results
lmms_eval_specific_kwargs:
  default:
    pre_prompt: "SYNTH-PRE "
    post_prompt: "{post_prompt}"
''')
    (task / "vstar_bench.yaml").write_text('''include: _default_template_yaml
metric_list:
  - metric: vstar_overall_acc
    aggregation: !function utils.vstar_aggregate_results
''')
    (task / "utils.py").write_text(NEVER_RUN)
    _git(root)
    return root
