"""agentsynth-rl: every pack is an RL environment, with rewards that are the world's verdicts.

- :class:`PackEnv` / :class:`AsyncPackEnv`: the Gymnasium API over any pack.
- :class:`VerdictReward`, :func:`environment_factory`, :func:`make_dataset`: TRL's GRPOTrainer.
- ``agentsynth_rl.serve``: the pack as an OpenEnv server (``agentsynth rl serve PACK``).
- ``agentsynth_rl.export``: ``agentsynth pack export PACK --format verifiers|openenv`` (installable
  packages; ``agentsynth_rl.verifiers_env`` is what a verifiers export runs on).

Names are imported on first use, so importing the package loads neither gymnasium nor openenv.
"""

from __future__ import annotations

from agentsynth_kernel import lazy_exports

_EXPORTS = {
    "AsyncPackEnv": "env", "PackEnv": "env", "register_gymnasium": "env", "EpisodeOver": "env",
    "ActionError": "actions", "parse_actions": "actions", "completion_steps": "actions",
    "VerdictReward": "grpo", "environment_factory": "grpo", "make_dataset": "grpo", "dataset_rows": "grpo",
    "PackToolEnv": "grpo", "export_pack": "export",
}
__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
