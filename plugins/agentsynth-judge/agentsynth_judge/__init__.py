"""agentsynth-judge: rubric judges (heuristic, LLM, ensemble), pairwise preferences, calibration, rewards.

Use them in a run spec (``judge: {type: heuristic}``) or from Python::

    from agentsynth_judge import HeuristicJudge, score_sync
    result = score_sync(HeuristicJudge(), trajectory, verdicts)
"""

from .agreement import Confusion, agreement_stats, cohen_kappa, fleiss_kappa, rank_auc
from .base import RubricJudge, score_sync
from .calibrate import Calibration, calibrate_results, read_run
from .ensemble import EnsembleJudge
from .heuristic import HeuristicJudge, gather_evidence
from .llm_judge import JudgeOutputError, LLMJudge, parse_reply, render_trajectory, score_schema
from .metadata import METADATA
from .pairwise import PairwiseResult, Preference, PreferencePair, compare, length_bias, preference_pairs
from .reward import DEFAULT_WEIGHTS, Reward, RewardWeights, compute_reward
from .rubric import DEFAULT_RUBRIC, Dimension, Rubric, load_rubric, parse_rubric

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_RUBRIC", "DEFAULT_WEIGHTS", "METADATA", "Calibration", "Confusion", "Dimension", "EnsembleJudge",
    "HeuristicJudge", "JudgeOutputError", "LLMJudge", "PairwiseResult", "Preference", "PreferencePair", "Reward", "RewardWeights", "Rubric",
    "RubricJudge", "agreement_stats", "calibrate_results", "cohen_kappa", "compare", "compute_reward",
    "fleiss_kappa", "gather_evidence", "length_bias", "load_rubric", "parse_reply", "parse_rubric", "preference_pairs", "rank_auc", "read_run",
    "render_trajectory", "score_schema", "score_sync",
]
