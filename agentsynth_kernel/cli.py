"""The ``agentsynth`` command line: a thin click group whose commands load lazily.

Built-in commands live in ``agentsynth_kernel/commands/`` and are imported only
when invoked, so ``agentsynth --help`` imports no plugin and no heavy library.
Plugins add commands through the ``register_commands`` hook, loaded the first
time a command that is not built in is asked for.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

# name -> ("module:attribute", short help). Keep the help here so --help needs no import.
BUILTIN_COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("agentsynth_kernel.commands.run:run", "Run a spec: every task x trial, checked on the world's end state."),
    "bench": ("agentsynth_kernel.commands.bench:bench", "Benchmark a policy on a pack: pass@1, pass^k, CI gate."),
    "pack": ("agentsynth_kernel.commands.pack:pack", "Create and validate scenario packs."),
    "plugins": ("agentsynth_kernel.commands.plugins:plugins", "List installed plugins, what they register, and broken ones."),
    "resume": ("agentsynth_kernel.commands.runs:resume", "Continue a stopped or killed run from its run directory."),
    "status": ("agentsynth_kernel.commands.runs:status", "Progress, pass rates, cost and errors of a run directory."),
    "inspect": ("agentsynth_kernel.commands.runs:inspect", "Show one task's trajectories from a run directory."),
    "verify": ("agentsynth_kernel.commands.runs:verify", "Re-check stored trajectories by replaying them in a fresh world."),
}


def _load(ref: str) -> click.Command | None:
    import importlib

    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:  # declared but not built yet
            return None
        raise
    command: click.Command | None = getattr(module, attr)
    return command


def _extensible(group: click.Group, root: LazyGroup) -> None:
    """A built-in group (``pack``) that plugins add subcommands to from ``register_commands``
    (``cli.commands["pack"].add_command(...)``): a subcommand it lacks, or its listing, loads the
    plugin commands first."""
    find, names = group.get_command, group.list_commands

    def get_command(ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = find(ctx, cmd_name)
        if command is None and not LazyGroup._plugins_loaded:
            root.load_plugin_commands()
            command = find(ctx, cmd_name)
        return command

    def list_commands(ctx: click.Context) -> list[str]:
        root.load_plugin_commands()
        return names(ctx)

    group.get_command = get_command  # type: ignore[method-assign]
    group.list_commands = list_commands  # type: ignore[method-assign]


# built-in groups plugins add subcommands to (``cli.commands["pack"].add_command(...)`` in
# ``register_commands``): loaded before any plugin's commands, so the group is there to extend
EXTENSIBLE_GROUPS = ("pack",)


class LazyGroup(click.Group):
    """Resolves built-in commands on demand and plugin commands on first miss."""

    _plugins_loaded = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(BUILTIN_COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        if cmd_name in BUILTIN_COMMANDS:
            command = _load(BUILTIN_COMMANDS[cmd_name][0])
            if command is not None:
                if isinstance(command, click.Group):
                    _extensible(command, self)
                self.add_command(command, cmd_name)
            return command
        self.load_plugin_commands()
        return self.commands.get(cmd_name)

    def load_plugin_commands(self) -> None:
        if LazyGroup._plugins_loaded:
            return
        LazyGroup._plugins_loaded = True
        for name in EXTENSIBLE_GROUPS:
            if name not in self.commands:
                self.get_command(click.get_current_context(silent=True), name)  # type: ignore[arg-type]
        from .plugins import get_host

        get_host().notify("register_commands", cli=self)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, BUILTIN_COMMANDS[name][1]) for name in sorted(BUILTIN_COMMANDS)]
        rows += [(n, c.get_short_help_str(70)) for n, c in sorted(self.commands.items()) if n not in BUILTIN_COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    epilog="Plugins add more commands (e.g. `agentsynth mcp`); `agentsynth plugins` lists what is installed.",
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(package_name="agentsynth", prog_name="agentsynth")
def cli() -> None:
    """agentsynth: outcome-verified agent data and benchmarks.

    An agent acts in a real, seeded world; checkers decide pass/fail from the
    world's end state. One pack of tasks is a benchmark, a CI gate, a data
    factory and an RL environment.
    """


def _exit_now(code: int) -> None:
    """Leave at once when an interrupted episode's worker thread may still be inside a C call (a
    SQLite statement): finalising the interpreter under such a daemon thread can crash the process
    (SIGSEGV instead of exit 130, seen about once in eight Ctrl-Cs). Everything worth keeping is
    already stored: the run store is closed before the interrupt reaches here."""
    import threading

    if threading.active_count() > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _collect_then_freeze() -> None:
    """The last exit hook of the command (registered first, so it runs after every plugin's).
    Interpreter finalisation runs full collections over every object of the hundreds of modules a
    command imported: ~0.1 s of CPU with every plugin installed, for ~1 ms of garbage. One
    collection here frees today's cycles (their finalisers run as always); ``gc.freeze()`` then
    keeps finalisation's collections off what was still alive, which module teardown frees by
    reference count as before."""
    import gc

    gc.collect()
    gc.freeze()


def main(argv: list[str] | None = None) -> Any:
    """Console entry point: user errors become one clean message per problem and exit code 2."""
    from .errors import AgentsynthError

    if argv is None:  # the command itself, not a caller in this process
        import atexit

        atexit.register(_collect_then_freeze)
    try:
        return cli.main(args=argv, prog_name="agentsynth", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
        click.echo("interrupted: finished episodes are stored; resume with the same --run-dir", err=True)
        if argv is None:  # the command itself, not a caller in this process
            _exit_now(130)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except AgentsynthError as exc:
        for line in str(exc).splitlines():
            click.echo(f"error: {line}", err=True)
        sys.exit(2)
    except Exception as exc:  # a bug, not bad input: say so, keep the traceback one switch away
        if os.environ.get("AGENTSYNTH_DEBUG"):
            raise
        click.echo(f"internal error: {type(exc).__name__}: {exc}", err=True)
        click.echo("this is a bug in agentsynth or a plugin; rerun with AGENTSYNTH_DEBUG=1 for the traceback", err=True)
        sys.exit(1)
