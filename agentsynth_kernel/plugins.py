"""Plugin discovery, broken-plugin isolation, the component registry and listing.

Everything is loaded once, lazily, behind :func:`get_host` (never at import):
entry points of the group ``agentsynth`` (the kernel's own built-ins are one of
them), then ``check_pending()`` so a misspelled hook fails loudly, then every
``register_*`` hook, one plugin at a time so one broken plugin cannot take the
others down.

Switches (environment variables, read at load time):

- ``AGENTSYNTH_LOAD_PLUGINS=a,b``: load only these entry points (empty: none but the built-ins).
- ``AGENTSYNTH_DISABLE_PLUGINS=x,y``: block these plugins.
- ``AGENTSYNTH_DISABLE_PLUGIN_AUTOLOAD=1``: load no third-party entry point.
- ``AGENTSYNTH_TRACE_PLUGINS=1``: print every hook call to stderr.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import attrs
import importlib_metadata
import pluggy

from . import hookspecs
from .errors import PluginError, did_you_mean
from .importing import code_ref_problem, import_object

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "agentsynth"
KERNEL_DISTRIBUTION = "agentsynth"
ESSENTIAL_PLUGINS = ("builtins",)

# what a plugin registers (``Registration.kind``, the ``<kind>`` of ``register_<kind>s``)
ComponentKind = Literal["environment", "checker", "policy", "judge", "generator", "exporter", "importer",
                        "executor", "domain", "pack"]
# kind -> the hook that registers it
KINDS: dict[ComponentKind, str] = {
    "environment": "register_environments",
    "checker": "register_checkers",
    "policy": "register_policies",
    "judge": "register_judges",
    "generator": "register_generators",
    "exporter": "register_exporters",
    "importer": "register_importers",
    "executor": "register_executors",
    "domain": "register_domains",
    "pack": "register_packs",
}
OBSERVER_HOOKS = ("run_started", "episode_finished", "run_finished")


@attrs.frozen
class Registration:
    """One registered component: what a ``type:`` name resolves to.

    A plugin may register its factory and spec class as ``"module:attribute"`` strings: they are
    imported the first time this registration is used, not when the plugin loads, so loading every
    plugin (every ``agentsynth`` command does) imports none of their component modules."""

    kind: ComponentKind
    name: str
    _factory: Any  # a callable for components, a Path for packs, or "module:attribute"
    plugin: str
    description: str = ""
    _spec_cls: Any = None  # an attrs class, or "module:attribute"
    _resolved: dict[str, Any] = attrs.field(factory=dict, eq=False, repr=False)  # reference -> object, this host's

    @property
    def factory(self) -> Any:
        if self.kind == "pack" or not isinstance(self._factory, str):
            return self._factory
        factory = _resolve(self._factory, self)
        if not callable(factory):
            raise PluginError(f"plugin {self.plugin!r}: {self.kind} {self.name!r}: factory is not callable "
                              f"({self._factory!r})")
        return factory

    @property
    def spec_cls(self) -> type | None:
        spec_cls = _resolve(self._spec_cls, self) if isinstance(self._spec_cls, str) else self._spec_cls
        if spec_cls is not None and not (isinstance(spec_cls, type) and attrs.has(spec_cls)):
            what = f" ({self._spec_cls!r})" if isinstance(self._spec_cls, str) else ""
            raise PluginError(f"plugin {self.plugin!r}: {self.kind} {self.name!r}: spec_cls must be an attrs class{what}")
        return spec_cls


def _resolve(ref: str, reg: Registration) -> Any:
    """The object a registered ``"module:attribute"`` names, looked up once per registration (a
    new host, after a module was edited and reloaded, gets the module as it is now)."""
    value = reg._resolved.get(ref)
    if value is None:
        try:
            value = import_object(ref)
        except Exception as exc:  # the import's own error, named (import_object wraps it with its cause)
            cause = exc.__cause__ or exc
            raise PluginError(f"plugin {reg.plugin!r}: {reg.kind} {reg.name!r}: cannot import {ref!r}: "
                              f"{type(cause).__name__}: {cause}") from exc
        reg._resolved[ref] = value
    return value


def _is_ref(value: Any) -> bool:
    """A ``"package.module:attribute.path"`` reference: absolute dotted names on both sides."""
    module, sep, attribute = value.partition(":") if isinstance(value, str) else ("", "", "")
    return bool(sep) and _dotted(module) and _dotted(attribute)


def _dotted(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


@attrs.define
class PluginInfo:
    """What ``agentsynth plugins`` shows about one plugin."""

    name: str
    distribution: str = ""
    version: str = ""
    hooks: list[str] = attrs.field(factory=list)
    registered: dict[str, list[str]] = attrs.field(factory=dict)
    errors: list[str] = attrs.field(factory=list)
    loaded: bool = True

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _env_list(name: str) -> list[str] | None:
    value = os.environ.get(name)
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def _pack_distribution(module: Any) -> Path | None:
    """The pack directory of a *pack distribution* (``pip install agentsynth-pack-NAME``): an
    entry point naming a package that holds ``pack.yaml`` and implements no hook. A pack author
    publishes a pack without writing a plugin; its version and content hash travel with results."""
    location = getattr(module, "__file__", None)
    if not location or not (Path(location).parent / "pack.yaml").is_file():
        return None
    # what the module defines, not dir(): a package's lazy exports (lazy_exports' __dir__) would all
    # be imported here, at every command, and one that cannot import would break them all
    if any(hasattr(value, "agentsynth_impl") for value in vars(module).values()):
        return None
    return Path(location).parent


class _PackDistribution:
    """Registers a pack distribution's pack under its entry-point name."""

    def __init__(self, name: str, directory: Path, distribution: str) -> None:
        self.name, self.directory, self.distribution = name, directory, distribution

    @hookspecs.hookimpl
    def register_packs(self, register: Any) -> None:
        register(self.name, self.directory, description=f"pack distribution {self.distribution}")


class PluginHost:
    """The loaded plugin manager plus the registry built from its hooks."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager("agentsynth")
        self.pm.add_hookspecs(hookspecs)
        self.registry: dict[str, dict[str, Registration]] = {kind: {} for kind in KINDS}
        self.plugins: dict[str, PluginInfo] = {}
        self._order: list[str] = []

    # --- loading ----------------------------------------------------------------------------

    def load_entry_points(self) -> None:
        allow = _env_list("AGENTSYNTH_LOAD_PLUGINS")
        deny = set(_env_list("AGENTSYNTH_DISABLE_PLUGINS") or ()) - set(ESSENTIAL_PLUGINS)
        no_autoload = os.environ.get("AGENTSYNTH_DISABLE_PLUGIN_AUTOLOAD", "") not in ("", "0")
        for name in deny:
            self.pm.set_blocked(name)
        seen: set[str] = set()
        for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in seen:  # the same distribution visible twice on sys.path
                continue
            seen.add(ep.name)
            dist = ep.dist.name if ep.dist else ""
            version = ep.dist.version if ep.dist else ""
            essential = dist == KERNEL_DISTRIBUTION and ep.name in ESSENTIAL_PLUGINS
            if not essential:
                if no_autoload or (allow is not None and ep.name not in allow) or ep.name in deny:
                    continue
            info = PluginInfo(ep.name, dist, version)
            self.plugins[ep.name] = info
            try:
                module = ep.load()
            except Exception as exc:  # ImportError, a missing optional dependency, a bug
                info.loaded = False
                info.errors.append(f"failed to import {ep.value!r}: {type(exc).__name__}: {exc}")
                log.warning("agentsynth plugin %r (%s) failed to import: %s", ep.name, dist, exc)
                continue
            pack_dir = _pack_distribution(module)
            if pack_dir is not None:  # a pack published on its own: no code, a pack.yaml in the package
                module = _PackDistribution(ep.name, pack_dir, dist)
            self.add_plugin(module, ep.name, info=info, register_components=False)
        self._check_pending()
        for name in list(self._order):
            self._register_components(name)

    def add_plugin(
        self, plugin: object, name: str, *, info: PluginInfo | None = None, register_components: bool = True
    ) -> PluginInfo:
        """Register one plugin object (tests, programmatic use) and run its ``register_*`` hooks."""
        if info is None:
            info = PluginInfo(name, getattr(plugin, "__name__", type(plugin).__name__))
        self.plugins[name] = info
        try:
            self.pm.register(plugin, name=name)
        except Exception as exc:  # bad hook signature, duplicate plugin name
            info.loaded = False
            info.errors.append(f"{type(exc).__name__}: {exc}")
            return info
        self._order.append(name)
        info.hooks = sorted(c.name for c in (self.pm.get_hookcallers(plugin) or []))
        if register_components:
            self._check_pending()
            if info.loaded:
                self._register_components(name)
        return info

    def remove_plugin(self, name: str) -> None:
        """Unregister a plugin and everything it registered."""
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin)
        if name in self._order:
            self._order.remove(name)
        self.plugins.pop(name, None)
        for entries in self.registry.values():
            for key in [k for k, r in entries.items() if r.plugin == name]:
                del entries[key]

    def _check_pending(self) -> None:
        """Hook implementations with no matching spec (a typo) mark their plugin broken."""
        while True:
            try:
                self.pm.check_pending()
                return
            except pluggy.PluginValidationError as exc:
                name = self.pm.get_name(exc.plugin) or "?"
                info = self.plugins.setdefault(name, PluginInfo(name))
                info.loaded = False
                info.errors.append(str(exc))
                self.pm.unregister(exc.plugin)
                if name in self._order:
                    self._order.remove(name)

    def _only(self, hook: str, name: str) -> Any:
        others = [self.pm.get_plugin(n) for n in self._order if n != name]
        return self.pm.subset_hook_caller(hook, remove_plugins=[p for p in others if p is not None])

    def _register_components(self, plugin_name: str) -> None:
        info = self.plugins[plugin_name]
        for kind, hook in KINDS.items():
            if hook not in info.hooks:
                continue
            register = self._make_register(kind, plugin_name, info)
            try:
                self._only(hook, plugin_name)(register=register)
            except Exception as exc:
                info.errors.append(f"{hook} raised {type(exc).__name__}: {exc}")
                log.warning("agentsynth plugin %r: %s raised %s", plugin_name, hook, exc)

    def _make_register(self, kind: ComponentKind, plugin_name: str, info: PluginInfo) -> Callable[..., None]:
        entries = self.registry[kind]

        def register(
            name: str, factory: Any, /, *, description: str = "", spec_cls: type | str | None = None
        ) -> None:
            if not isinstance(name, str) or not name:
                raise PluginError(f"plugin {plugin_name!r}: {kind} name must be a non-empty string, got {name!r}")
            if kind == "pack" and _is_ref(factory):
                raise PluginError(f"plugin {plugin_name!r}: pack {name!r}: a pack is registered with its directory "
                                  f"(a Path), not a reference ({factory!r})")
            if kind != "pack" and not callable(factory) and not _is_ref(factory):
                hint = f" (nor a 'package.module:attribute' reference: {factory!r})" if isinstance(factory, str) else ""
                raise PluginError(f"plugin {plugin_name!r}: {kind} {name!r}: factory is not callable{hint}")
            if spec_cls is not None and not _is_ref(spec_cls) and not (isinstance(spec_cls, type) and attrs.has(spec_cls)):
                hint = f" (nor a 'package.module:attribute' reference: {spec_cls!r})" if isinstance(spec_cls, str) else ""
                raise PluginError(f"plugin {plugin_name!r}: {kind} {name!r}: spec_cls must be an attrs class{hint}")
            for what, value in (("factory", factory), ("spec_cls", spec_cls)):
                # the module looked up without importing it, so `agentsynth plugins` lists a typo or a
                # missing dependency; the module itself is imported on first use
                missing = code_ref_problem(value, None) if isinstance(value, str) and kind != "pack" else None
                if missing:  # registered all the same (a use names the import error); `agentsynth plugins` shows it now
                    message = f"{kind} {name!r}: {what} {value!r}: {missing}"
                    info.errors.append(message)
                    log.warning("agentsynth: plugin %r: %s", plugin_name, message)
            existing = entries.get(name)
            if existing is not None:
                message = (
                    f"duplicate {kind} name {name!r}: already registered by plugin {existing.plugin!r};"
                    f" the one from plugin {plugin_name!r} is skipped"
                )
                info.errors.append(message)
                log.warning("agentsynth: %s", message)
                return
            if kind == "pack":
                from pathlib import Path

                factory = Path(factory)
            entries[name] = Registration(kind, name, factory, plugin_name, description, spec_cls)
            info.registered.setdefault(kind, []).append(name)

        return register

    # --- lookups ----------------------------------------------------------------------------

    def get(self, kind: str, name: str) -> Registration:
        """The registration for ``type: name``; ``KeyError`` with a did-you-mean message if unknown."""
        entries = self.registry[kind]
        try:
            return entries[name]
        except KeyError:
            hint = did_you_mean(name, entries)
            broken = [n for n, p in self.plugins.items() if not p.loaded]
            extra = f"; broken plugins: {', '.join(broken)} (see `agentsynth plugins`)" if broken else ""
            raise KeyError(f"unknown {kind} {name!r}{hint}{extra}") from None

    def names(self, kind: str) -> list[str]:
        return sorted(self.registry[kind])

    def notify(self, hook: str, **kwargs: Any) -> None:
        """Call a lifecycle observer hook on each plugin; one that raises is logged and skipped."""
        for name in list(self._order):
            info = self.plugins.get(name)
            if info is None or hook not in info.hooks:
                continue
            try:
                self._only(hook, name)(**kwargs)
            except Exception as exc:
                log.warning("agentsynth plugin %r: %s raised %s: %s", name, hook, type(exc).__name__, exc)

    def list_plugins(self) -> list[PluginInfo]:
        return sorted(self.plugins.values(), key=lambda p: (p.name != "builtins", p.name))


_host: PluginHost | None = None
_lock = threading.Lock()


def get_host() -> PluginHost:
    """The process-wide plugin host, loaded on first use."""
    global _host
    if _host is None:
        with _lock:
            if _host is None:
                host = PluginHost()
                if os.environ.get("AGENTSYNTH_TRACE_PLUGINS", "") not in ("", "0"):
                    host.pm.trace.root.setwriter(sys.stderr.write)
                    host.pm.enable_tracing()
                host.load_entry_points()
                _host = host
    return _host


def get_plugin_manager() -> pluggy.PluginManager:
    """The loaded pluggy PluginManager, for calling hooks from Python."""
    return get_host().pm


def reset_plugins() -> None:
    """Forget the loaded host; the next :func:`get_host` loads afresh (tests, env-var changes)."""
    global _host
    with _lock:
        _host = None
