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

from typing import TYPE_CHECKING

from .lazy import lazy_exports

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
    "builtins.policies": ("oracle_actions", "to_action"),
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
        "StageError", "SyncWorker", "attribute", "cap_observation", "close_world", "how_called", "replay_episode", "run_episode",
    ),
    "errors": ("AgentsynthError", "BudgetExceeded", "PluginError", "SpecError", "did_you_mean"),
    "hookspecs": ("Register", "hookimpl"),
    "importing": ("CodeRef", "absolute_code_ref", "import_file", "import_object"),
    "lazy": ("lazy_exports",),
    "llm": (
        "LEDGER_KEY", "BudgetLedger", "BudgetUnenforceable", "LLMClient", "LLMError", "Reservation", "client_for",
        "price_for", "resolve_route",
    ),
    "plugins": ("ComponentKind", "PluginHost", "get_host", "get_plugin_manager", "reset_plugins"),
    "records": (
        "SCHEMA_VERSION", "ERROR_KINDS", "ErrorKind", "Status", "Action", "Answer", "EpisodeResult", "Message", "Observation", "Step",
        "ToolCall", "ToolSpec", "Trajectory", "Usage", "Verdict", "from_json", "read_jsonl", "to_builtins",
        "to_json", "to_openai_messages", "write_jsonl", "is_error_kind",
    ),
    "report": ("INFRA_KINDS", "USER_KIND", "summarize", "summarize_results", "write_json"),
    "results": ("ResultSet", "Tally"),
    "rundirs": ("load_stored_spec", "open_run", "run_status", "unfinished_episodes", "verify_run"),
    "secrets": (
        "REDACTED", "has_redacted", "is_secret_key", "item_is_secret", "known_secrets", "redact", "redact_bytes",
        "redact_text", "remember",
    ),
    "spec": (
        "SPLITS", "Bounds", "Budget", "ComponentSpec", "InvalidValue", "Pack", "RunSpec", "Task", "UserSpec", "build",
        "check_component", "check_pack", "content_hash", "load_pack", "load_run_spec", "located", "parse_component",
        "read_yaml", "resolve_pack", "resolve_run", "select_tasks", "structure", "unstructure",
    ),
    "stats": ("paired_sign_test", "pass_at_k", "pass_hat_k", "verifiable_gate", "wilson_interval"),
    "store": ("STORE_FILE", "RunStore"),
    "user": ("USER_SYSTEM_PROMPT", "SimulatedUser", "UserFailed", "accepts_parameter", "agent_view", "split_tools",
             "user_policy_spec"),
    "validation": ("Gate", "audit_problem", "is_world_state", "validate_pack"),
}

# public name -> module that defines it
_EXPORTS: dict[str, str] = {name: module for module, names in PUBLIC.items() for name in names}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # the same names, for type checkers (tests/test_public_api.py keeps the two in step)
    from .adapters import (
        InvalidToolCall as InvalidToolCall,
    )
    from .adapters import (
        action_from_anthropic_tool_use as action_from_anthropic_tool_use,
    )
    from .adapters import (
        action_from_openai_tool_call as action_from_openai_tool_call,
    )
    from .adapters import (
        anthropic_tool_result as anthropic_tool_result,
    )
    from .adapters import (
        observation_text as observation_text,
    )
    from .adapters import (
        openai_tool_result as openai_tool_result,
    )
    from .adapters import (
        parse_arguments as parse_arguments,
    )
    from .adapters import (
        to_anthropic_tools as to_anthropic_tools,
    )
    from .adapters import (
        to_openai_tools as to_openai_tools,
    )
    from .adapters import (
        tool_specs as tool_specs,
    )
    from .adapters import (
        validate_arguments as validate_arguments,
    )
    from .audit import (
        AuditReport as AuditReport,
    )
    from .audit import (
        TaskAudit as TaskAudit,
    )
    from .audit import (
        audit_pack as audit_pack,
    )
    from .builtins.llm_policy import (
        fit_messages as fit_messages,
    )
    from .builtins.policies import (
        oracle_actions as oracle_actions,
    )
    from .builtins.policies import (
        to_action as to_action,
    )
    from .components import (
        Checker as Checker,
    )
    from .components import (
        Domain as Domain,
    )
    from .components import (
        Environment as Environment,
    )
    from .components import (
        EpisodeState as EpisodeState,
    )
    from .components import (
        Executor as Executor,
    )
    from .components import (
        Exporter as Exporter,
    )
    from .components import (
        Generator as Generator,
    )
    from .components import (
        Importer as Importer,
    )
    from .components import (
        Judge as Judge,
    )
    from .components import (
        JudgeResult as JudgeResult,
    )
    from .components import (
        Policy as Policy,
    )
    from .components import (
        Turn as Turn,
    )
    from .components import (
        call as call,
    )
    from .components import (
        runs_inline as runs_inline,
    )
    from .engine import (
        Plan as Plan,
    )
    from .engine import (
        RunInfo as RunInfo,
    )
    from .engine import (
        RunReport as RunReport,
    )
    from .engine import (
        derive_seed as derive_seed,
    )
    from .engine import (
        execute as execute,
    )
    from .engine import (
        open_run_store as open_run_store,
    )
    from .engine import (
        pack_record as pack_record,
    )
    from .engine import (
        plan_episodes as plan_episodes,
    )
    from .engine import (
        run as run,
    )
    from .engine import (
        run_hash as run_hash,
    )
    from .engine import (
        session_state as session_state,
    )
    from .engine import (
        spec_diff as spec_diff,
    )
    from .engine import (
        trajectory_bytes as trajectory_bytes,
    )
    from .engine import (
        versions as versions,
    )
    from .episode import (
        MAX_ARGUMENT_BYTES as MAX_ARGUMENT_BYTES,
    )
    from .episode import (
        MAX_OBSERVATION_CHARS as MAX_OBSERVATION_CHARS,
    )
    from .episode import (
        MAX_OBSERVATION_DATA_BYTES as MAX_OBSERVATION_DATA_BYTES,
    )
    from .episode import (
        Episode as Episode,
    )
    from .episode import (
        EpisodeConfig as EpisodeConfig,
    )
    from .episode import (
        StageError as StageError,
    )
    from .episode import (
        SyncWorker as SyncWorker,
    )
    from .episode import (
        attribute as attribute,
    )
    from .episode import (
        cap_observation as cap_observation,
    )
    from .episode import (
        close_world as close_world,
    )
    from .episode import (
        how_called as how_called,
    )
    from .episode import (
        replay_episode as replay_episode,
    )
    from .episode import (
        run_episode as run_episode,
    )
    from .errors import (
        AgentsynthError as AgentsynthError,
    )
    from .errors import (
        BudgetExceeded as BudgetExceeded,
    )
    from .errors import (
        PluginError as PluginError,
    )
    from .errors import (
        SpecError as SpecError,
    )
    from .errors import (
        did_you_mean as did_you_mean,
    )
    from .hookspecs import (
        Register as Register,
    )
    from .hookspecs import (
        hookimpl as hookimpl,
    )
    from .importing import (
        CodeRef as CodeRef,
    )
    from .importing import (
        absolute_code_ref as absolute_code_ref,
    )
    from .importing import (
        import_file as import_file,
    )
    from .importing import (
        import_object as import_object,
    )
    from .lazy import (
        lazy_exports as lazy_exports,
    )
    from .llm import (
        LEDGER_KEY as LEDGER_KEY,
    )
    from .llm import (
        BudgetLedger as BudgetLedger,
    )
    from .llm import (
        BudgetUnenforceable as BudgetUnenforceable,
    )
    from .llm import (
        LLMClient as LLMClient,
    )
    from .llm import (
        LLMError as LLMError,
    )
    from .llm import (
        Reservation as Reservation,
    )
    from .llm import (
        client_for as client_for,
    )
    from .llm import (
        price_for as price_for,
    )
    from .llm import (
        resolve_route as resolve_route,
    )
    from .plugins import (
        ComponentKind as ComponentKind,
    )
    from .plugins import (
        PluginHost as PluginHost,
    )
    from .plugins import (
        get_host as get_host,
    )
    from .plugins import (
        get_plugin_manager as get_plugin_manager,
    )
    from .plugins import (
        reset_plugins as reset_plugins,
    )
    from .records import (
        ERROR_KINDS as ERROR_KINDS,
    )
    from .records import (
        SCHEMA_VERSION as SCHEMA_VERSION,
    )
    from .records import (
        Action as Action,
    )
    from .records import (
        Answer as Answer,
    )
    from .records import (
        EpisodeResult as EpisodeResult,
    )
    from .records import (
        ErrorKind as ErrorKind,
    )
    from .records import (
        Message as Message,
    )
    from .records import (
        Observation as Observation,
    )
    from .records import (
        Status as Status,
    )
    from .records import (
        Step as Step,
    )
    from .records import (
        ToolCall as ToolCall,
    )
    from .records import (
        ToolSpec as ToolSpec,
    )
    from .records import (
        Trajectory as Trajectory,
    )
    from .records import (
        Usage as Usage,
    )
    from .records import (
        Verdict as Verdict,
    )
    from .records import (
        from_json as from_json,
    )
    from .records import (
        is_error_kind as is_error_kind,
    )
    from .records import (
        read_jsonl as read_jsonl,
    )
    from .records import (
        to_builtins as to_builtins,
    )
    from .records import (
        to_json as to_json,
    )
    from .records import (
        to_openai_messages as to_openai_messages,
    )
    from .records import (
        write_jsonl as write_jsonl,
    )
    from .report import (
        INFRA_KINDS as INFRA_KINDS,
    )
    from .report import (
        USER_KIND as USER_KIND,
    )
    from .report import (
        summarize as summarize,
    )
    from .report import (
        summarize_results as summarize_results,
    )
    from .report import (
        write_json as write_json,
    )
    from .results import (
        ResultSet as ResultSet,
    )
    from .results import (
        Tally as Tally,
    )
    from .rundirs import (
        load_stored_spec as load_stored_spec,
    )
    from .rundirs import (
        open_run as open_run,
    )
    from .rundirs import (
        run_status as run_status,
    )
    from .rundirs import (
        unfinished_episodes as unfinished_episodes,
    )
    from .rundirs import (
        verify_run as verify_run,
    )
    from .secrets import (
        REDACTED as REDACTED,
    )
    from .secrets import (
        has_redacted as has_redacted,
    )
    from .secrets import (
        is_secret_key as is_secret_key,
    )
    from .secrets import (
        item_is_secret as item_is_secret,
    )
    from .secrets import (
        known_secrets as known_secrets,
    )
    from .secrets import (
        redact as redact,
    )
    from .secrets import (
        redact_bytes as redact_bytes,
    )
    from .secrets import (
        redact_text as redact_text,
    )
    from .secrets import (
        remember as remember,
    )
    from .spec import (
        SPLITS as SPLITS,
    )
    from .spec import (
        Bounds as Bounds,
    )
    from .spec import (
        Budget as Budget,
    )
    from .spec import (
        ComponentSpec as ComponentSpec,
    )
    from .spec import (
        InvalidValue as InvalidValue,
    )
    from .spec import (
        Pack as Pack,
    )
    from .spec import (
        RunSpec as RunSpec,
    )
    from .spec import (
        Task as Task,
    )
    from .spec import (
        UserSpec as UserSpec,
    )
    from .spec import (
        build as build,
    )
    from .spec import (
        check_component as check_component,
    )
    from .spec import (
        check_pack as check_pack,
    )
    from .spec import (
        content_hash as content_hash,
    )
    from .spec import (
        load_pack as load_pack,
    )
    from .spec import (
        load_run_spec as load_run_spec,
    )
    from .spec import (
        located as located,
    )
    from .spec import (
        parse_component as parse_component,
    )
    from .spec import (
        read_yaml as read_yaml,
    )
    from .spec import (
        resolve_pack as resolve_pack,
    )
    from .spec import (
        resolve_run as resolve_run,
    )
    from .spec import (
        select_tasks as select_tasks,
    )
    from .spec import (
        structure as structure,
    )
    from .spec import (
        unstructure as unstructure,
    )
    from .stats import (
        paired_sign_test as paired_sign_test,
    )
    from .stats import (
        pass_at_k as pass_at_k,
    )
    from .stats import (
        pass_hat_k as pass_hat_k,
    )
    from .stats import (
        verifiable_gate as verifiable_gate,
    )
    from .stats import (
        wilson_interval as wilson_interval,
    )
    from .store import (
        STORE_FILE as STORE_FILE,
    )
    from .store import (
        RunStore as RunStore,
    )
    from .user import (
        USER_SYSTEM_PROMPT as USER_SYSTEM_PROMPT,
    )
    from .user import (
        SimulatedUser as SimulatedUser,
    )
    from .user import (
        UserFailed as UserFailed,
    )
    from .user import (
        accepts_parameter as accepts_parameter,
    )
    from .user import (
        agent_view as agent_view,
    )
    from .user import (
        split_tools as split_tools,
    )
    from .user import (
        user_policy_spec as user_policy_spec,
    )
    from .validation import (
        Gate as Gate,
    )
    from .validation import (
        audit_problem as audit_problem,
    )
    from .validation import (
        is_world_state as is_world_state,
    )
    from .validation import (
        validate_pack as validate_pack,
    )
