"""agentsynth: outcome-verified agent data and benchmarks (the kernel).

The public API, for plugins, scripts and notebooks, is what this namespace exports (``__all__``),
plus :mod:`agentsynth_kernel.testing` (test kits: a scripted LLM server, the adversarial kit) and
:func:`agentsynth_kernel.cli.main` (the command, in-process). Everything else is internal and may
change; a test fails when a plugin in this repository imports a name from elsewhere. Importing
this package is cheap: names are imported from their modules on first use (PEP 562), so
``agentsynth --help`` loads neither the records nor pluggy, and nothing is discovered until
:func:`get_host` is called.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# module -> the public names it defines (one obvious place for each concept)
PUBLIC: dict[str, tuple[str, ...]] = {
    "adapters": (
        "InvalidToolCall", "action_from_anthropic_tool_use", "action_from_openai_tool_call", "observation_text",
        "openai_tool_result", "anthropic_tool_result", "parse_arguments", "to_anthropic_tools", "to_openai_tools",
        "tool_specs", "validate_arguments",
    ),
    "audit": ("AuditReport", "TaskAudit", "audit_pack"),
    "builtins.llm_policy": ("fit_messages",),
    "builtins.policies": ("to_action",),
    "components": (
        "Checker", "Domain", "Environment", "EpisodeState", "Executor", "Exporter", "Generator", "Importer",
        "Judge", "JudgeResult", "Policy", "Turn", "call", "runs_inline",
    ),
    "engine": (
        "Plan", "RunInfo", "RunReport", "derive_seed", "execute", "open_run_store", "pack_record", "plan_episodes",
        "run", "run_hash", "session_state", "spec_diff", "trajectory_bytes", "versions",
    ),
    "episode": (
        "MAX_ARGUMENT_BYTES", "MAX_OBSERVATION_CHARS", "MAX_OBSERVATION_DATA_BYTES", "Episode", "EpisodeConfig",
        "StageError", "attribute", "cap_observation", "replay_episode", "run_episode",
    ),
    "errors": ("AgentsynthError", "BudgetExceeded", "PluginError", "SpecError", "did_you_mean"),
    "hookspecs": ("hookimpl",),
    "importing": ("CodeRef", "absolute_code_ref", "import_file", "import_object"),
    "llm": (
        "LEDGER_KEY", "BudgetLedger", "BudgetUnenforceable", "LLMClient", "LLMError", "Reservation", "client_for",
        "price_for", "resolve_route",
    ),
    "plugins": ("PluginHost", "get_host", "get_plugin_manager", "reset_plugins"),
    "records": (
        "SCHEMA_VERSION", "Action", "Answer", "EpisodeResult", "Message", "Observation", "Step", "ToolCall",
        "ToolSpec", "Trajectory", "Usage", "Verdict", "from_json", "read_jsonl", "to_builtins", "to_json",
        "to_openai_messages", "write_jsonl",
    ),
    "report": ("INFRA_KINDS", "summarize", "summarize_results", "write_json"),
    "results": ("ResultSet", "Tally"),
    "rundirs": ("load_stored_spec", "open_run", "run_status", "unfinished_episodes", "verify_run"),
    "secrets": (
        "REDACTED", "has_redacted", "is_secret_key", "item_is_secret", "redact", "redact_bytes", "redact_text",
        "remember",
    ),
    "spec": (
        "SPLITS", "Bounds", "Budget", "ComponentSpec", "InvalidValue", "Pack", "RunSpec", "Task", "build",
        "check_component", "check_pack", "content_hash", "load_pack", "load_run_spec", "parse_component",
        "read_yaml", "resolve_pack", "select_tasks", "structure", "unstructure",
    ),
    "stats": ("paired_sign_test", "pass_at_k", "pass_hat_k", "wilson_interval"),
    "store": ("STORE_FILE", "RunStore"),
    "validation": ("Gate", "audit_problem", "is_world_state", "validate_pack"),
}

# public name -> module that defines it
_EXPORTS: dict[str, str] = {name: module for module, names in PUBLIC.items() for name in names}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentsynth_kernel' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:  # the same names, for type checkers (tests/test_public_api.py keeps the two in step)
    from .adapters import (
        InvalidToolCall,
        action_from_anthropic_tool_use,
        action_from_openai_tool_call,
        anthropic_tool_result,
        observation_text,
        openai_tool_result,
        parse_arguments,
        to_anthropic_tools,
        to_openai_tools,
        tool_specs,
        validate_arguments,
    )
    from .audit import (
        AuditReport,
        TaskAudit,
        audit_pack,
    )
    from .builtins.llm_policy import (
        fit_messages,
    )
    from .builtins.policies import (
        to_action,
    )
    from .components import (
        Checker,
        Domain,
        Environment,
        EpisodeState,
        Executor,
        Exporter,
        Generator,
        Importer,
        Judge,
        JudgeResult,
        Policy,
        Turn,
        call,
        runs_inline,
    )
    from .engine import (
        Plan,
        RunInfo,
        RunReport,
        derive_seed,
        execute,
        open_run_store,
        pack_record,
        plan_episodes,
        run,
        run_hash,
        session_state,
        spec_diff,
        trajectory_bytes,
        versions,
    )
    from .episode import (
        MAX_ARGUMENT_BYTES,
        MAX_OBSERVATION_CHARS,
        MAX_OBSERVATION_DATA_BYTES,
        Episode,
        EpisodeConfig,
        StageError,
        attribute,
        cap_observation,
        replay_episode,
        run_episode,
    )
    from .errors import (
        AgentsynthError,
        BudgetExceeded,
        PluginError,
        SpecError,
        did_you_mean,
    )
    from .hookspecs import (
        hookimpl,
    )
    from .importing import (
        CodeRef,
        absolute_code_ref,
        import_file,
        import_object,
    )
    from .llm import (
        LEDGER_KEY,
        BudgetLedger,
        BudgetUnenforceable,
        LLMClient,
        LLMError,
        Reservation,
        client_for,
        price_for,
        resolve_route,
    )
    from .plugins import (
        PluginHost,
        get_host,
        get_plugin_manager,
        reset_plugins,
    )
    from .records import (
        SCHEMA_VERSION,
        Action,
        Answer,
        EpisodeResult,
        Message,
        Observation,
        Step,
        ToolCall,
        ToolSpec,
        Trajectory,
        Usage,
        Verdict,
        from_json,
        read_jsonl,
        to_builtins,
        to_json,
        to_openai_messages,
        write_jsonl,
    )
    from .report import (
        INFRA_KINDS,
        summarize,
        summarize_results,
        write_json,
    )
    from .results import (
        ResultSet,
        Tally,
    )
    from .rundirs import (
        load_stored_spec,
        open_run,
        run_status,
        unfinished_episodes,
        verify_run,
    )
    from .secrets import (
        REDACTED,
        has_redacted,
        is_secret_key,
        item_is_secret,
        redact,
        redact_bytes,
        redact_text,
        remember,
    )
    from .spec import (
        SPLITS,
        Bounds,
        Budget,
        ComponentSpec,
        InvalidValue,
        Pack,
        RunSpec,
        Task,
        build,
        check_component,
        check_pack,
        content_hash,
        load_pack,
        load_run_spec,
        parse_component,
        read_yaml,
        resolve_pack,
        select_tasks,
        structure,
        unstructure,
    )
    from .stats import (
        paired_sign_test,
        pass_at_k,
        pass_hat_k,
        wilson_interval,
    )
    from .store import (
        STORE_FILE,
        RunStore,
    )
    from .validation import (
        Gate,
        audit_problem,
        is_world_state,
        validate_pack,
    )
