"""The plugin contract of agentsynth. Every hook a plugin can implement is here.

A plugin is a module (or object) with functions marked ``@hookimpl``, exposed
through the entry-point group ``agentsynth``::

    # pyproject.toml
    [project.entry-points.agentsynth]
    sql = "agentsynth_sql.plugin"

    # agentsynth_sql/plugin.py
    from agentsynth_kernel import hookimpl

    @hookimpl
    def register_environments(register):
        register("sql", SqlEnvironment, description="A seeded SQLite world")

Capability hooks follow one pattern: the kernel calls ``register_<kind>s`` with
a ``register`` callback and the plugin calls it once per component. The name
is what run specs use as ``type:``. ``register`` validates what it is given,
refuses a name another plugin already took (the error names both), and
records which plugin registered what (``agentsynth plugins`` shows it).

The signature of every ``register`` callback (the :class:`Register` protocol) is::

    register(name: str, factory: Callable[..., Component], /, *,
             description: str = "", spec_cls: type | None = None) -> None

``factory(**params)`` builds one component from the parameters given in YAML
(everything beside ``type:``). If ``spec_cls`` (an attrs class) is given, the
parameters are first structured into it with path-qualified errors and the
factory is called as ``factory(spec)``; otherwise unknown parameters are
detected from the factory's signature. Context is passed only to factories
that declare it by name: ``base_dir`` (the directory of the file that declared
the component, to resolve relative paths), ``task`` and ``pack`` (the current
Task and Pack), and ``run`` (the RunInfo; ``run.services`` holds run-scoped
shared objects such as the LLM client that enforces the run's budget).

``factory`` and ``spec_cls`` may also be ``"module:attribute"`` strings: they are imported the
first time the component is built or its parameters are checked, not when the plugin loads, so
a plugin whose components import heavy libraries costs every ``agentsynth`` command nothing
(``register("rest", "agentsynth_rest.env:RestEnvironment", spec_cls="agentsynth_rest.env:RestEnvSpec")``).
A reference that does not import is a PluginError naming the plugin, where it is used.

Hooks are called synchronously at load time unless their docstring says
otherwise. A hook that raises is reported against its plugin and skipped; the
other plugins keep working.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    import click

    from .records import EpisodeResult, Trajectory
    from .spec import Pack, RunSpec, Task
    from .testing.adversarial import Exploit, PerturbedTask
    from .types import RunInfo

hookspec = pluggy.HookspecMarker("agentsynth")


class Register(Protocol):
    """The ``register`` callback every ``register_<kind>s`` hook receives (see the module docstring)."""

    def __call__(self, name: str, factory: Any, /, *, description: str = "",
                 spec_cls: type | str | None = None) -> None: ...
hookimpl = pluggy.HookimplMarker("agentsynth")


# --- capabilities ---------------------------------------------------------------------------------


@hookspec
def register_environments(register: Register) -> None:
    """Register :class:`~agentsynth_kernel.components.Environment` factories.

    Returns nothing; call ``register(name, factory, ...)`` once per environment.

    Example::

        @hookimpl
        def register_environments(register):
            register("sql", SqlEnvironment, description="SQLite world with sql_query/sql_execute")
    """


@hookspec
def register_checkers(register: Register) -> None:
    """Register :class:`~agentsynth_kernel.components.Checker` factories.

    Every task needs a checker that reads the world's end state (``pack validate``'s
    ``world-state-checkers`` gate): a checker class says whether it does with a ``world_state``
    attribute, or ``world_state_for(params)`` when that depends on its keys; a plugin checker that
    says nothing counts as reading the world. See :func:`~agentsynth_kernel.validation.is_world_state`.

    Example::

        @hookimpl
        def register_checkers(register):
            register("sql", SqlChecker, description="Compare a query's result with an expected value")
    """


@hookspec
def register_policies(register: Register) -> None:
    """Register :class:`~agentsynth_kernel.components.Policy` factories (agents).

    A policy factory is called once per episode. If it accepts ``task`` or
    ``pack`` keyword arguments it receives the current Task / Pack (the
    ``oracle`` policy uses this to find the pack's oracle).

    Example::

        @hookimpl
        def register_policies(register):
            register("always-refuse", lambda: RefusePolicy())
    """


@hookspec
def register_judges(register: Register) -> None:
    """Register :class:`~agentsynth_kernel.components.Judge` factories.

    Example::

        @hookimpl
        def register_judges(register):
            register("heuristic", HeuristicJudge, description="Deterministic rubric judge")
    """


@hookspec
def register_generators(register: Register) -> None:
    """Register :class:`~agentsynth_kernel.components.Generator` factories.

    Example::

        @hookimpl
        def register_generators(register):
            register("back_translation", BackTranslation)
    """


@hookspec
def register_exporters(register: Register) -> None:
    """Register :class:`~agentsynth_kernel.components.Exporter` factories (training-data formats).

    Example::

        @hookimpl
        def register_exporters(register):
            register("sharegpt", ShareGptExporter)
    """


@hookspec
def register_importers(register: Register) -> None:
    """Register :class:`~agentsynth_kernel.components.Importer` factories (foreign trace formats).

    Example::

        @hookimpl
        def register_importers(register):
            register("openai", OpenAIChatImporter)
    """


@hookspec
def register_domains(register: Register) -> None:
    """Register :class:`~agentsynth_kernel.components.Domain` factories: text-only task families
    (QA from documents, math word problems ...) for generators that need no world.

    Example::

        @hookimpl
        def register_domains(register):
            register("math", MathDomain, description="Word problems with exact-fraction answers")
    """


@hookspec
def register_executors(register: Register) -> None:
    """Register :class:`~agentsynth_kernel.components.Executor` factories: where episodes run.

    A spec selects one with ``executor: {type: NAME, ...}`` (or ``--executor NAME``); the
    default is the built-in in-process ``local`` executor.

    Example::

        @hookimpl
        def register_executors(register):
            register("ray", RayExecutor, description="Episodes on a Ray cluster")
    """


@hookspec
def register_packs(register: Register) -> None:
    """Register scenario packs a plugin ships, by name.

    ``register(name, path, /, *, description="")`` where ``path`` is a pack
    directory (with ``pack.yaml``) or a single pack YAML file. Users then write
    ``pack: NAME`` in a spec or ``agentsynth bench --pack NAME``.

    Example::

        @hookimpl
        def register_packs(register):
            register("core", Path(__file__).parent / "packs" / "core")
    """


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``agentsynth`` command line.

    Called lazily, only when a command that is not built in is invoked (so
    ``agentsynth --help`` stays fast and imports no plugin).

    Example::

        @hookimpl
        def register_commands(cli):
            @cli.group()
            def mcp():
                "Work with MCP servers."
    """


@hookspec(firstresult=True)
def run_generation(spec_file: Path, spec: RunSpec, run_dir: Path | None, json_path: str | None,
                   quiet: bool) -> int | None:
    """Run a generation spec: ``agentsynth run SPEC`` where SPEC has ``generate: {type: NAME, ...}``.

    The plugin that registered generator ``spec.generate.type`` runs it (its own scheduling,
    store and output) and returns the exit code; every other plugin returns ``None``
    (``firstresult``). ``run_dir`` is ``--run-dir`` (``None``: the plugin's default),
    ``json_path`` is ``--json``. Called synchronously from the ``run`` command (inside its click
    context, so a click command can be invoked with ``click.get_current_context().invoke``).

    Example::

        @hookimpl
        def run_generation(spec_file, spec, run_dir, json_path, quiet):
            if spec.generate.type not in MY_GENERATORS:
                return None
            return run_my_generator(spec_file, run_dir=run_dir, json_path=json_path, quiet=quiet)
    """


# --- run lifecycle observers -----------------------------------------------------------------------
# Called by the engine on the event loop thread. Keep them quick; they must not raise
# (an observer that raises is logged against its plugin and the run goes on).


@hookspec
def run_started(run: RunInfo) -> None:
    """A run is about to execute its episodes. ``run`` carries the spec, run id and directory.

    Example::

        @hookimpl
        def run_started(run):
            print(f"run {run.run_id}: {run.total} episodes")
    """


@hookspec
def episode_finished(run: RunInfo, result: EpisodeResult) -> None:
    """One episode ended (passed, failed or error), after it was stored.

    Example::

        @hookimpl
        def episode_finished(run, result):
            if result.status == "error":
                alert(result.task_id, result.error)
    """


@hookspec
def run_finished(run: RunInfo, results: list[EpisodeResult]) -> None:
    """A run ended (completed or stopped). Plugins release shared resources here
    (e.g. a browser reused across episodes).

    Example::

        @hookimpl
        def run_finished(run, results):
            shutdown_shared_browser()
    """


# --- pack scaffolding ------------------------------------------------------------------------------

if TYPE_CHECKING:
    from pathlib import Path


@hookspec(firstresult=True)
def scaffold_pack(name: str, directory: Path, environment: str | None, schema: Path | None) -> list[Path] | None:
    """Write a new pack for ``agentsynth pack new NAME`` into ``directory`` (which exists and is empty).

    ``environment`` is the ``--env`` the user asked for (``None``: no preference);
    ``schema`` is the ``--from-schema`` file, if given. Return the paths written,
    or ``None`` when this plugin does not scaffold that environment or schema (the
    next plugin is asked; ``firstresult``). The pack written must pass
    ``agentsynth pack validate`` (at least one task, a working oracle, a world-state
    checker per task). Raise ``ValueError`` with a clear message for a schema the
    plugin handles but cannot read. Called synchronously.

    Example::

        @hookimpl
        def scaffold_pack(name, directory, environment, schema):
            if environment not in (None, "sql"):
                return None
            (directory / "pack.yaml").write_text(render_pack(name, schema))
            (directory / "oracle.py").write_text(render_oracle(schema))
            return [directory / "pack.yaml", directory / "oracle.py"]
    """


@hookspec(firstresult=True)
def checks_from_demo(environment: str, world: Any, trajectory: Trajectory) -> dict[str, Any] | None:
    """State checks for exactly what a demonstration changed, for ``agentsynth pack new NAME
    --from-demo FILE``: the kernel built a fresh world of type ``environment`` (``world`` is the
    object the plugin's factory returned), reset it and ran the demonstration's actions in it
    (``trajectory``); the world is not closed yet. Diff its end state against its start state and
    return ``None`` for worlds of other plugins (``firstresult``), else a mapping:

    - ``changes`` (int): how many changes the end state has against the start state;
    - ``checkers`` (list of checker specs ``{"type": NAME, ...}``): checks that pass on this end
      state and fail when a change is missing, made differently or made more broadly (values
      checked exactly, not counts); with no change, the checks that nothing changed;
    - ``environment`` (mapping, optional): task-level environment parameters the checks need
      (e.g. the changes the task may make);
    - ``summary``, ``notes`` (lists of str, optional): one line per change, and remarks, shown to the user.

    The kernel refuses a demonstration that changes nothing and gives no answer (its checks
    would pass a no-op), plays the actions twice and refuses checks that differ, and checks that
    the pack's oracle passes them and ``noop`` does not. Raise ``ValueError`` for a change the
    plugin cannot write a check for. Called synchronously, on the thread that played the world.

    Example::

        @hookimpl
        def checks_from_demo(environment, world, trajectory):
            if environment != "kv":
                return None
            changed = {k: v for k, v in world.data.items() if world.initial.get(k) != v}
            return {"changes": len(changed),
                    "checkers": [{"type": "kv_equals", "key": k, "value": v} for k, v in changed.items()]}
    """


# --- verdict integrity -----------------------------------------------------------------------------


@hookspec
def adversarial_exploits(environment: str, pack: Pack | None) -> list[Exploit] | None:
    """Exploit attempts against worlds of type ``environment`` (the pack's ``environment.type``):
    the ways an agent could try to pass a task without doing it in this world (shadowing the
    objects a checker reads, writing outside the world, exhausting the host, making checkers
    hang). ``agentsynth pack audit`` and ``pack validate`` run them with the kit's generic ones
    and fail a pack where any passes. Return ``None`` for environments of other plugins. Called
    synchronously; every plugin's list is used.

    ``pack`` is the pack under attack (``None`` when the kit is asked for a world type alone); a
    world made of other worlds (``composite``) reads its children's types from it. An
    implementation may leave ``pack`` out of its signature.

    Example::

        from agentsynth_kernel.testing.adversarial import Exploit

        @hookimpl
        def adversarial_exploits(environment):
            if environment != "counter":
                return None
            return [Exploit("counter.negative", "count down past zero to wrap around",
                            [{"tool": "inc", "arguments": {"by": -2**63}}])]
    """


# --- models ----------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def perturb_task(pack: Pack, task: Task, seed: int) -> PerturbedTask | None:
    """A sibling of ``task`` whose world is relabelled so that its goal is isomorphic (other ids,
    names, codes), for ``pack audit``: the pack's oracle, relabelled the same way, should pass the
    sibling, and the original's transcript replayed as is should not (a policy that memorised a
    transcript gets nothing); the audit reports both per task. Return ``None`` for packs of other
    worlds or tasks that cannot be relabelled (``firstresult``).
    Called synchronously.

    Example::

        from agentsynth_kernel.testing.adversarial import PerturbedTask

        @hookimpl
        def perturb_task(pack, task, seed):
            if pack.environment is None or pack.environment.type != "counter":
                return None
            mapping = {"7": "9"}
            return PerturbedTask.by_mapping(pack, task, mapping, environment={"start": 2})
    """


@hookspec(firstresult=True)
def local_model_endpoint(model: str) -> tuple[str, str] | None:
    """Where a ``local`` model is served: ``model`` is the model string as written in a spec
    (``local`` or ``local/NAME``). Return ``(api_base, wire_model)``: the base URL of an
    OpenAI-compatible server (``http://127.0.0.1:PORT/v1``) and the model name to send it, or
    ``None`` when this plugin does not serve that name (the next plugin is asked;
    ``firstresult``). The kernel's :func:`~agentsynth_kernel.llm.resolve_route` asks on every
    request, so answer from a cache after the first call; the first call may start a server and
    block until it is ready. Raise :class:`~agentsynth_kernel.errors.AgentsynthError` with a clear
    message for a name the plugin serves but cannot start. Called synchronously, from any thread.

    Example::

        @hookimpl
        def local_model_endpoint(model):
            if model != "local/echo":
                return None
            return ensure_echo_server_started(), "echo"
    """


@hookspec(firstresult=True)
def submit_run(run_dir: Path, url: str) -> dict[str, Any] | None:
    """Submit a finished run directory to a leaderboard hub at ``url`` (``agentsynth bench --submit URL``).

    Return a dict with at least ``accepted`` (bool) and ``message`` (for the user: the rank, or the
    reason for a refusal), or ``None`` when this plugin does not handle that URL (the next plugin is
    asked; ``firstresult``). Credentials come from the environment (agentsynth-hub:
    ``AGENTSYNTH_HUB_TOKEN``), never from arguments. Raise
    :class:`~agentsynth_kernel.errors.AgentsynthError` for a hub that cannot be reached. Called
    synchronously after the run's results are stored.

    Example::

        @hookimpl
        def submit_run(run_dir, url):
            from agentsynth_hub.remote import submit_run
            return submit_run(run_dir, url)
    """


@hookspec(firstresult=True)
def resolve_remote_pack(ref: str, hub: str) -> Path | None:
    """A pack named ``ref`` that is not installed, fetched from the hub at ``hub`` (``--hub URL`` or
    ``AGENTSYNTH_HUB_URL``).

    Return the directory of a local copy (with its pack.yaml), or ``None`` when this plugin does not
    know that hub or the hub has no such pack (``firstresult``). Called synchronously by
    :func:`~agentsynth_kernel.spec.resolve_pack`, only for names that are neither a path nor a
    registered pack.

    Example::

        @hookimpl
        def resolve_remote_pack(ref, hub):
            from agentsynth_hub.remote import resolve_remote_pack
            return resolve_remote_pack(ref, hub)
    """
