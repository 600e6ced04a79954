"""agentsynth-judge: rubric judges (heuristic, LLM, ensemble), pairwise preferences, calibration, rewards.

Use them in a run spec (``judge: {type: heuristic}``) or from Python::

    from agentsynth_judge import HeuristicJudge, score_sync
    result = score_sync(HeuristicJudge(), trajectory, verdicts)

Names are imported on first use, so loading the plugin (its entry point) imports only what it registers.
"""

from __future__ import annotations

from agentsynth_kernel import lazy_exports

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_RUBRIC", "DEFAULT_WEIGHTS", "METADATA", "Calibration", "Confusion", "Dimension", "EnsembleJudge",
    "HeuristicJudge", "JudgeOutputError", "LLMJudge", "PairwiseResult", "Preference", "PreferencePair", "Reward", "RewardWeights", "Rubric",
    "RubricJudge", "agreement_stats", "calibrate_results", "cohen_kappa", "compare", "compute_reward",
    "fleiss_kappa", "gather_evidence", "length_bias", "load_rubric", "parse_reply", "parse_rubric", "preference_pairs", "rank_auc", "read_run",
    "render_trajectory", "score_schema", "score_sync",
]

_EXPORTS: dict[str, str | None] = {  # name -> the submodule it comes from (None: the submodule itself)
    **dict.fromkeys(("Confusion", "agreement_stats", "cohen_kappa", "fleiss_kappa", "rank_auc"), "agreement"),
    **dict.fromkeys(("RubricJudge", "score_sync"), "base"),
    **dict.fromkeys(("Calibration", "calibrate_results", "read_run"), "calibrate"),
    **dict.fromkeys(("EnsembleJudge",), "ensemble"),
    **dict.fromkeys(("HeuristicJudge", "gather_evidence"), "heuristic"),
    **dict.fromkeys(("JudgeOutputError", "LLMJudge", "parse_reply", "render_trajectory", "score_schema"), "llm_judge"),
    **dict.fromkeys(("METADATA",), "metadata"),
    **dict.fromkeys(("PairwiseResult", "Preference", "PreferencePair", "compare", "length_bias", "preference_pairs"), "pairwise"),
    **dict.fromkeys(("DEFAULT_WEIGHTS", "Reward", "RewardWeights", "compute_reward"), "reward"),
    **dict.fromkeys(("DEFAULT_RUBRIC", "Dimension", "Rubric", "load_rubric", "parse_rubric"), "rubric"),
}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
