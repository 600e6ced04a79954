"""agentsynth-rl: gym API over any pack, TRL GRPO reward functions and environment_factory, OpenEnv server; rewards are the world's verdicts"""
