"""The agentsynth plugin: judges ``heuristic``, ``llm``, ``ensemble``, ``learned``, ``routed``, the
``judged`` checker and the ``agentsynth judge`` command."""

from __future__ import annotations

from typing import Any

from agentsynth_kernel import hookimpl

from .ensemble import EnsembleSpec, make_ensemble
from .heuristic import HeuristicSpec, make_heuristic
from .judged import JudgedSpec, make_judged
from .llm_judge import LLMJudgeSpec, make_llm
from .routing import LearnedSpec, RoutedSpec, make_learned, make_routed


@hookimpl
def register_judges(register: Any) -> None:
    register("heuristic", make_heuristic, spec_cls=HeuristicSpec,
             description="Deterministic rubric judge from the trajectory and verdicts (no LLM; offline default)")
    register("llm", make_llm, spec_cls=LLMJudgeSpec,
             description="A chat model scores the rubric (validated JSON, re-asked when invalid), via the kernel LLM client")
    register("ensemble", make_ensemble, spec_cls=EnsembleSpec,
             description="Several judges aggregated by mean / median / majority, with agreement stats")
    register("learned", make_learned, spec_cls=LearnedSpec,
             description="A learned verifier's calibrated P(pass) (agentsynth judge train; needs the 'learned' extra)")
    register("routed", make_routed, spec_cls=RoutedSpec,
             description="A learned verifier decides the confident items, a real judge the borderline band")


@hookimpl
def register_checkers(register: Any) -> None:
    register("judged", make_judged, spec_cls=JudgedSpec,
             description="A judge's score as a check (min_score): rules only a reader can check, e.g. a simulated user's")


@hookimpl
def register_commands(cli: Any) -> None:
    from .cli import judge

    cli.add_command(judge, "judge")
