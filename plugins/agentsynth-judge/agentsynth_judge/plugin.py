"""The agentsynth plugin: judges ``heuristic``, ``llm``, ``ensemble``, ``learned``, ``routed``, the
``judged`` checker and the ``agentsynth judge`` command."""

from __future__ import annotations

from typing import Any

from agentsynth_kernel import hookimpl


@hookimpl
def register_judges(register: Any) -> None:
    register("heuristic", "agentsynth_judge.heuristic:make_heuristic", spec_cls="agentsynth_judge.heuristic:HeuristicSpec",
             description="Deterministic rubric judge from the trajectory and verdicts (no LLM; offline default)")
    register("llm", "agentsynth_judge.llm_judge:make_llm", spec_cls="agentsynth_judge.llm_judge:LLMJudgeSpec",
             description="A chat model scores the rubric (validated JSON, re-asked when invalid), via the kernel LLM client")
    register("ensemble", "agentsynth_judge.ensemble:make_ensemble", spec_cls="agentsynth_judge.ensemble:EnsembleSpec",
             description="Several judges aggregated by mean / median / majority, with agreement stats")
    register("learned", "agentsynth_judge.routing:make_learned", spec_cls="agentsynth_judge.routing:LearnedSpec",
             description="A learned verifier's calibrated P(pass) (agentsynth judge train; needs the 'learned' extra)")
    register("routed", "agentsynth_judge.routing:make_routed", spec_cls="agentsynth_judge.routing:RoutedSpec",
             description="A learned verifier decides the confident items, a real judge the borderline band")


@hookimpl
def register_checkers(register: Any) -> None:
    register("judged", "agentsynth_judge.judged:make_judged", spec_cls="agentsynth_judge.judged:JudgedSpec",
             description="A judge's score as a check (min_score): rules only a reader can check, e.g. a simulated user's")


@hookimpl
def register_commands(cli: Any) -> None:
    from .cli import judge

    cli.add_command(judge, "judge")
