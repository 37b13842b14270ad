"""Two tiny checkpoints trained on the spot for the real-vLLM tests (tests/vllm) and benchmarks: a Qwen2
that calls the calculator (``calculator.py``) and an Idefics3 that zooms into images (``zoom.py``).

Test fixtures, not part of fasteval: they need torch, which only the vLLM venv has.
"""
