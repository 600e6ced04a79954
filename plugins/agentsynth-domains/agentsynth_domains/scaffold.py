'''The module ``agentsynth init-domain NAME -o FILE`` writes: a small working domain (capital
cities, verifiable by exact match) to edit into your own.'''

from __future__ import annotations

import keyword
import re

TEMPLATE = '''"""Domain {name!r} for agentsynth's autosynth loop (scaffolded by `agentsynth init-domain`).

Run it as is: `agentsynth run spec.yaml` with

    generate:
      type: autosynth
      domain: {file}          # this file (relative to the spec)
      challenger: local
      weak: local
      strong: local

Edit ``items`` (your grounding data), the prompts, ``validate`` and ``verify``. To publish it,
put this module in a package and register ``DOMAIN`` from a plugin's ``register_domains`` hook.
"""

from __future__ import annotations

from typing import Any

SEEDS = [
    {{"id": "{name}-0", "country": "France", "capital": "Paris"}},
    {{"id": "{name}-1", "country": "Kenya", "capital": "Nairobi"}},
    {{"id": "{name}-2", "country": "Peru", "capital": "Lima"}},
]


class {cls}:
    """Questions whose answer is one word, checked by exact match (verifiable mode)."""

    acceptance = "verifiable"  # or "rubric" / "judge"

    def __init__(self, **params: Any) -> None:
        self.params = params

    def items(self) -> list[dict[str, Any]]:
        """The grounding items; each needs a stable, unique "id" (the resume key)."""
        return list(SEEDS)

    def generation_prompt(self, item: dict[str, Any], feedback: str = "") -> str:
        prompt = (f"Write a hard riddle whose answer is the capital of {{item['country']}} ({{item['capital']}}). "
                  'Answer with JSON only: {{"question": "...", "answer": "..."}}')
        return prompt + (f"\\n\\nFeedback on your previous attempt: {{feedback}}" if feedback else "")

    def validate(self, candidate: dict[str, Any]) -> list[str]:
        problems = []
        if not str(candidate.get("question", "")).strip():
            problems.append("question: expected a non-empty string")
        if str(candidate.get("answer", "")).strip().lower() != str(candidate.get("capital", "")).lower():
            problems.append(f"answer: expected {{candidate.get('capital')!r}}")
        return problems

    def solver_prompt(self, candidate: dict[str, Any]) -> str:
        return f"{{candidate['question']}}\\nEnd with a final line 'answer: <one word>'."

    def audit_prompt(self, candidate: dict[str, Any]) -> str:
        return (f"Is this riddle fair and does it have exactly one answer, {{candidate['answer']}}?\\n"
                f"{{candidate['question']}}\\n" 'Answer with JSON only: {{"pass": true|false, "reason": "..."}}')

    def judge_prompt(self, candidate: dict[str, Any], response: str) -> str:
        return (f"Reference answer: {{candidate['answer']}}\\nResponse: {{response}}\\n"
                'Answer with JSON only: {{"score": S, "rationale": "..."}} with S in [0, 1].')

    def verify(self, candidate: dict[str, Any], response: str) -> bool | None:
        lines = [ln for ln in response.splitlines() if ln.lower().startswith("answer:")]
        if not lines:
            return None  # cannot tell: the judge decides
        return lines[-1].split(":", 1)[1].strip().strip(".").lower() == str(candidate["answer"]).lower()


DOMAIN = {cls}
'''


def class_name(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", name) if part) + "Domain"


def render(name: str, file: str) -> str:
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name) or keyword.iskeyword(name):
        raise ValueError(f"NAME: expected letters, digits, '_' or '-' (starting with a letter), got {name!r}")
    return TEMPLATE.format(name=name, cls=class_name(name), file=file)
