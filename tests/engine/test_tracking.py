"""The sweep's side of ``log_to:`` (engine/steer/tracking.py) that needs no tracker: the worker's environment.

The trackers run in a process of their own; it gets the trackers' own credentials and nothing the
config names as a key, nor any key-like variable of ours (tests/trackers: the live path end to end).
"""

from __future__ import annotations

from fasteval.engine.steer.tracking import worker_env


def test_the_trackers_process_gets_no_key_of_the_config() -> None:
    config = {"models": [{"name": "m", "provider": "openai", "api_key_env": "MY_OPENAI_KEY"}]}
    env = worker_env(config, {"MY_OPENAI_KEY": "sk-1", "SERPER_API_KEY": "s-2", "WANDB_API_KEY": "w-3",
                              "MLFLOW_TRACKING_TOKEN": "m-4", "AWS_SECRET_ACCESS_KEY": "a-5", "PATH": "/bin"})
    assert env == {"WANDB_API_KEY": "w-3", "MLFLOW_TRACKING_TOKEN": "m-4", "AWS_SECRET_ACCESS_KEY": "a-5",
                   "PATH": "/bin"}
