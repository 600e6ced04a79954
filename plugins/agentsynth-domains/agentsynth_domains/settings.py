"""The ``generate: {type: autosynth, ...}`` parameters, checked with path-qualified errors.

Every role (challenger, weak, strong, judge, auditor, reflector, loop_judge, mutator) is an *llm
spec*: a model string (``local``, ``openai/gpt-4o-mini``, ``hosted_vllm/NAME``) or a mapping
``{model, api_base, api_key_env, temperature, max_tokens}``.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import SpecError

ROLES = ("challenger", "solver", "judge", "auditor", "reflector", "loop_judge")
ACCEPTANCE = ("rubric", "verifiable", "judge")
PII_MODES = ("off", "mask", "drop")


@attrs.frozen
class LLMSpec:
    """Where one role's requests go."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float | None = None
    max_tokens: int | None = 1024
    json_mode: bool | None = None  # ask for response_format json_object on JSON roles (default: on for local)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}


@attrs.frozen
class Harness:
    """What metaopt evolves: rule strings appended to each role's system prompt, plus knobs."""

    rules: dict[str, list[str]] = attrs.field(factory=dict)
    knobs: dict[str, float] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"rules": {k: list(v) for k, v in sorted(self.rules.items()) if v}, "knobs": dict(sorted(self.knobs.items()))}


KNOBS = {"challenger_temperature": (0.0, 1.5), "solver_temperature": (0.0, 1.5)}


@attrs.frozen
class Thresholds:
    """Acceptance thresholds (autosynth's documented defaults)."""

    weak_avg_max: float = 0.65
    weak_max_max: float = 0.75
    strong_avg_min: float = 0.60
    strong_avg_max: float = 0.95  # exclusive: a strong average at 0.95 or above is too easy
    min_gap: float = 0.20
    weak_correct_max: int = 1  # of 4 attempts (scaled to `attempts`)
    strong_correct_min: int = 3  # of 4 attempts
    pass_score: float = 0.5  # a judged score at or above this counts as correct in verifiable mode


@attrs.frozen
class Settings:
    domain: str
    domain_params: dict[str, Any]
    challenger: LLMSpec
    weak: LLMSpec
    strong: LLMSpec
    judge: LLMSpec
    auditor: LLMSpec
    reflector: LLMSpec | None
    loop_judge: LLMSpec
    attempts: int = 4
    max_rounds: int = 3
    acceptance: str | None = None
    audit: bool = True
    short_circuit_strong: bool = False
    thresholds: Thresholds = Thresholds()
    pii: str = "mask"
    concurrency: int = 2
    limit: int | None = None
    cache: bool = True
    out: str | None = None
    harness: Harness = Harness()
    base_dir: str = "."
    mutator: LLMSpec | None = None
    metaopt: dict[str, Any] = attrs.field(factory=dict)


_KEYS = {"domain", "challenger", "weak", "strong", "judge", "auditor", "reflector", "loop_judge", "attempts",
         "max_rounds", "acceptance", "audit", "short_circuit_strong", "thresholds", "pii", "concurrency", "limit",
         "cache", "out", "harness", "mutator", "metaopt"}


def _hint(name: str, options: Any) -> str:
    close = difflib.get_close_matches(name, list(options), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def llm_spec(value: Any, where: str, problems: list[str]) -> LLMSpec | None:
    if isinstance(value, str) and value.strip():
        return LLMSpec(value.strip())
    if isinstance(value, dict):
        fields = {f.name for f in attrs.fields(LLMSpec)}
        bad = [k for k in value if k not in fields]
        for key in bad:
            problems.append(f"{where}.{key}: unknown key{_hint(str(key), fields)}")
        if not isinstance(value.get("model"), str) or not value["model"]:
            problems.append(f"{where}.model: expected a model string (e.g. local, openai/gpt-4o-mini)")
            return None
        if bad:
            return None
        for key in ("api_base", "api_key_env"):
            if value.get(key) is not None and not isinstance(value[key], str):
                problems.append(f"{where}.{key}: expected a string")
                return None
        temperature, max_tokens = value.get("temperature"), value.get("max_tokens")
        if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))):
            problems.append(f"{where}.temperature: expected a number")
            return None
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
            problems.append(f"{where}.max_tokens: expected a positive integer")
            return None
        json_mode = value.get("json_mode")
        if json_mode is not None and not isinstance(json_mode, bool):
            problems.append(f"{where}.json_mode: expected true or false")
            return None
        return LLMSpec(value["model"], value.get("api_base"), value.get("api_key_env"),
                       None if temperature is None else float(temperature), max_tokens if "max_tokens" in value else 1024,
                       json_mode)
    problems.append(f"{where}: expected a model string or a mapping with 'model:', got {value!r}")
    return None


def parse_harness(value: Any, where: str, problems: list[str]) -> Harness:
    if value is None:
        return Harness()
    if not isinstance(value, dict):
        problems.append(f"{where}: expected a mapping with 'rules:' and/or 'knobs:'")
        return Harness()
    for key in value:
        if key not in ("rules", "knobs"):
            problems.append(f"{where}.{key}: unknown key{_hint(str(key), ('rules', 'knobs'))}")
    rules: dict[str, list[str]] = {}
    for role, texts in (value.get("rules") or {}).items():
        if role not in ROLES:
            problems.append(f"{where}.rules.{role}: unknown role{_hint(str(role), ROLES)} (roles: {', '.join(ROLES)})")
        elif not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            problems.append(f"{where}.rules.{role}: expected a list of strings")
        else:
            rules[role] = list(texts)
    knobs: dict[str, float] = {}
    for knob, number in (value.get("knobs") or {}).items():
        if knob not in KNOBS:
            problems.append(f"{where}.knobs.{knob}: unknown knob{_hint(str(knob), KNOBS)}")
        elif isinstance(number, bool) or not isinstance(number, (int, float)):
            problems.append(f"{where}.knobs.{knob}: expected a number")
        else:
            low, high = KNOBS[knob]
            knobs[knob] = min(high, max(low, float(number)))
    return Harness(rules, knobs)


def parse_settings(params: dict[str, Any], *, source: str, base_dir: Path) -> Settings:
    """Settings from a spec's ``generate:`` mapping (without ``type``); SpecError lists every problem."""
    where = "generate"
    problems: list[str] = []
    for key in params:
        if key not in _KEYS:
            problems.append(f"{where}.{key}: unknown key{_hint(str(key), _KEYS)}")
    domain = params.get("domain")
    domain_params: dict[str, Any] = {}
    if isinstance(domain, dict):
        domain_params = {k: v for k, v in domain.items() if k != "type"}
        domain = domain.get("type")
    if not isinstance(domain, str) or not domain:
        problems.append(f"{where}.domain: expected a domain name (math, docs_qa), a .py file, or {{type: NAME, ...}}")
        domain = ""
    roles: dict[str, LLMSpec | None] = {}
    for role in ("challenger", "weak", "strong"):
        if role not in params:
            problems.append(f"{where}.{role}: missing required key (an llm spec: a model string or {{model: ...}})")
            roles[role] = None
        else:
            roles[role] = llm_spec(params[role], f"{where}.{role}", problems)
    judge = llm_spec(params["judge"], f"{where}.judge", problems) if "judge" in params else roles["strong"]
    optional = {}
    for role, default in (("auditor", judge), ("loop_judge", judge), ("reflector", roles["challenger"])):
        value = params.get(role, "default")
        if value == "default":
            optional[role] = default
        elif value is None and role == "reflector":
            optional[role] = None  # deterministic feedback, no reflector requests
        else:
            optional[role] = llm_spec(value, f"{where}.{role}", problems)

    def integer(key: str, default: int | None, low: int, *, optional_: bool = False) -> int | None:
        value = params.get(key, default)
        if value is None and optional_:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            problems.append(f"{where}.{key}: expected an integer >= {low}, got {value!r}")
            return default
        return value

    def flag(key: str, default: bool) -> bool:
        value = params.get(key, default)
        if not isinstance(value, bool):
            problems.append(f"{where}.{key}: expected true or false, got {value!r}")
            return default
        return value

    attempts = integer("attempts", 4, 1)
    max_rounds = integer("max_rounds", 3, 1)
    concurrency = integer("concurrency", 2, 1)
    limit = integer("limit", None, 1, optional_=True)
    acceptance = params.get("acceptance")
    if acceptance is not None and acceptance not in ACCEPTANCE:
        problems.append(f"{where}.acceptance: expected one of {', '.join(ACCEPTANCE)}, got {acceptance!r}")
    pii = params.get("pii", "mask")
    if pii is False:
        pii = "off"
    if pii not in PII_MODES:
        problems.append(f"{where}.pii: expected one of {', '.join(PII_MODES)}, got {pii!r}")
    thresholds = Thresholds()
    raw = params.get("thresholds") or {}
    if not isinstance(raw, dict):
        problems.append(f"{where}.thresholds: expected a mapping")
    else:
        names = {f.name: f for f in attrs.fields(Thresholds)}
        good: dict[str, Any] = {}
        for key, value in raw.items():
            if key not in names:
                problems.append(f"{where}.thresholds.{key}: unknown key{_hint(str(key), names)}")
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                problems.append(f"{where}.thresholds.{key}: expected a number >= 0, got {value!r}")
            else:
                good[key] = int(value) if names[key].type in (int, "int") else float(value)
        thresholds = Thresholds(**good)
    out = params.get("out")
    if out is not None and not isinstance(out, str):
        problems.append(f"{where}.out: expected a file path")
    harness = parse_harness(params.get("harness"), f"{where}.harness", problems)
    mutator = llm_spec(params["mutator"], f"{where}.mutator", problems) if "mutator" in params else None
    metaopt = params.get("metaopt") or {}
    if not isinstance(metaopt, dict):
        problems.append(f"{where}.metaopt: expected a mapping (generations, train_items, val_items, temperature)")
        metaopt = {}
    if problems:
        raise SpecError(source, problems)
    assert roles["challenger"] and roles["weak"] and roles["strong"] and judge  # checked above
    return Settings(
        domain=domain, domain_params=domain_params, challenger=roles["challenger"], weak=roles["weak"],
        strong=roles["strong"], judge=judge, auditor=optional["auditor"] or judge,
        reflector=optional["reflector"], loop_judge=optional["loop_judge"] or judge,
        attempts=attempts or 4, max_rounds=max_rounds or 3, acceptance=acceptance,
        audit=flag("audit", True), short_circuit_strong=flag("short_circuit_strong", False), thresholds=thresholds,
        pii=pii, concurrency=concurrency or 2, limit=limit, cache=flag("cache", True), out=out, harness=harness,
        base_dir=str(base_dir), mutator=mutator or roles["challenger"], metaopt=metaopt,
    )
