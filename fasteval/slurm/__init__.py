"""Sweeps as Slurm job arrays: one array task per shard, a merge job after them, resubmission.

``fasteval slurm submit`` writes ``RUN/slurm/array.sbatch`` and ``merge.sbatch`` and submits them;
``status`` reads Slurm and each shard's run index; ``resume`` resubmits only unfinished shards.
"""

from fasteval.slurm.cluster import Cluster, SlurmError
from fasteval.slurm.scripts import SubmitOptions, array_script, merge_script
from fasteval.slurm.state import merge_shards, shard_dirs

__all__ = ["Cluster", "SlurmError", "SubmitOptions", "array_script", "merge_script", "merge_shards", "shard_dirs"]
