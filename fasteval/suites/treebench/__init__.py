"""TreeBench: loader, letter and box-IoU scoring (VLMEvalKit, TreeVGR, ours), score-file.
Importing registers ``treebench``."""

from fasteval.suites.treebench.boxes import fixed_iou, iou, treevgr_iou, vlmevalkit_iou
from fasteval.suites.treebench.loader import load_treebench
from fasteval.suites.treebench.suite import TreeBench

__all__ = ["TreeBench", "fixed_iou", "iou", "load_treebench", "treevgr_iou", "vlmevalkit_iou"]
