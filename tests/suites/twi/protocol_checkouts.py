"""Synthetic checkouts of DeepEyes, Mini-o3 and lmms-eval for the protocol tests: the reference
files and symbols the suites read, holding placeholder texts in our own words (never theirs).

Python files start with ``raise SystemExit`` (they must be parsed, never run); the YAML task
files carry ``!function`` tags as lmms-eval's do. Images are real PNGs made with pyvips.
"""

from __future__ import annotations

from pathlib import Path

import pyvips
from reference_repos import NEVER_RUN, write_deepeyes, write_lmms_eval, write_mini_o3

DE_SYSTEM_MARK = "SYNTH-DE-SYSTEM"
DE_FEEDBACK = "\nSYNTH-DE-V2 look again, then answer in tags."
MO_SYSTEM_MARK = "SYNTH-MO-SYSTEM"


def deepeyes_checkout(root: Path) -> Path:
    """``eval/eval_vstar.py`` (system prompt, user template joined to USER_PROMPT_V2) + the judge file."""
    write_deepeyes(root)
    (root / "eval" / "eval_vstar.py").write_text(NEVER_RUN + f'''import os

instruction_prompt_system = """{DE_SYSTEM_MARK} you may zoom.
<tools>
{{"type":"function","function":{{"name":"image_zoom_in_tool","description":"synthetic","parameters":{{}}}}}}
</tools>"""
USER_PROMPT_V2 = "{DE_FEEDBACK.encode("unicode_escape").decode()}"

instruction_prompt_before = """SYNTH-Q: {{question}}
SYNTH-OPTS: {{options}}
""" + USER_PROMPT_V2

user_prompt = USER_PROMPT_V2
''')
    return root


def mini_o3_checkout(root: Path) -> Path:
    """``verl/trainer/constants.py`` and the engine's error f-string + the judge file."""
    write_mini_o3(root)
    trainer = root / "verl" / "trainer"
    trainer.mkdir(parents=True, exist_ok=True)
    (trainer / "constants.py").write_text(NEVER_RUN + f'''TOOL_CROP_SYSTEM_PROMPT="""{MO_SYSTEM_MARK} write <grounding> with 0-1 boxes."""

SYSTEM_PROMPT_MAP={{"tool_crop": TOOL_CROP_SYSTEM_PROMPT}}

TOOL_CALL_CROP_MULTI_TRUN_PROMPT="SYNTH-OBS act={{action_turn}} obs={{observation_turn}}:\\n<|vision_start|><|image_pad|><|vision_end|>.\\nSYNTH-OBS go on."

ERROR_INFO_MULTI_TURN_PROMPT="SYNTH-ERR-HINT fix it."
''')
    rollout = root / "verl" / "workers" / "rollout" / "vllm_rollout"
    rollout.mkdir(parents=True, exist_ok=True)
    (rollout / "vllm_async_engine.py").write_text(NEVER_RUN + '''class AsyncvLLMEngine:
    def process_tool_call(self, vllm_input, decoded_resp_):
        error_info = None
        if error_info is not None:
            tool_outputs = f"SYNTH-ERR ({error_info}).\\n"
        else:
            tool_outputs = crop_image()
        return tool_outputs
''')
    return root


def lmms_eval_checkout(root: Path) -> Path:
    """lmms-eval's V* task files (``!function`` tags included): the shared fixture's."""
    return write_lmms_eval(root)


def regions_png(width: int = 200, height: int = 100) -> bytes:
    """Left half grey 30, right half grey 200, a block of grey 90 at x 140..179, y 20..59 (PNG, exact)."""
    x = pyvips.Image.xyz(width, height)[0]
    y = pyvips.Image.xyz(width, height)[1]
    img = (x < width // 2).ifthenelse(30, 200)
    block = (x >= 140) & (x < 180) & (y >= 20) & (y < 60)
    img = block.ifthenelse(90, img).cast("uchar")
    data: bytes = img.write_to_buffer(".png")
    return data
