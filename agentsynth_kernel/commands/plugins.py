"""``agentsynth plugins``."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import click

PLURAL = {"policy": "policies"}


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--hook", help="Only plugins implementing this hook.")
def plugins(as_json: bool, hook: str | None) -> None:
    """List installed plugins: distribution, version, hooks, what each registers, and broken ones."""
    infos = [p for p in plugin_listing() if hook is None or hook in p["hooks"]]
    if as_json:
        click.echo(json.dumps(infos, indent=2))
        return
    for info in infos:
        state = "" if info["loaded"] and not info["errors"] else (" [BROKEN]" if not info["loaded"] else " [WARNINGS]")
        dist = f"{info['distribution']} {info['version']}".strip()
        click.echo(f"{info['name']}{state}  ({dist})" if dist else f"{info['name']}{state}")
        for kind, names in sorted(info["registered"].items()):
            click.echo(f"  {PLURAL.get(kind, kind + 's')}: {', '.join(names)}")
        others = [h for h in info["hooks"] if not h.startswith("register_") or h == "register_commands"]
        if others:
            click.echo(f"  hooks: {', '.join(others)}")
        for error in info["errors"]:
            click.echo(f"  error: {error}")


# --- the listing, cached: importing every plugin costs ~0.5 s; reading a cached listing does not --------


def plugin_listing() -> list[dict[str, Any]]:
    """What every installed plugin registers. Computed by loading the plugins (their code runs),
    then cached under a fingerprint of everything that could change it — the entry points, the
    installed distributions' versions and, for editable installs, their source files' mtimes and
    sizes, and the plugin-selection variables — so a later listing reads the cache without
    importing any plugin. A listing with a broken plugin is never cached (it is shown afresh)."""
    import sys

    loaded = sys.modules.get("agentsynth_kernel.plugins")  # not imported for a cached listing (it pulls pluggy)
    if loaded is not None and loaded._host is not None:  # this process has plugins loaded (maybe more): them
        return [p.to_dict() for p in loaded._host.list_plugins()]
    # tracing hook calls (AGENTSYNTH_TRACE_PLUGINS) needs them called: no cache then
    key = None if os.environ.get("AGENTSYNTH_TRACE_PLUGINS") else _fingerprint()
    cache = _cache_dir() / f"plugins-{key}.json" if key else None
    if cache is not None and cache.is_file():
        try:
            data = json.loads(cache.read_text(encoding="utf-8"))
            if isinstance(data, list):
                return data
        except (OSError, ValueError):
            pass  # a damaged cache is recomputed
    from ..plugins import get_host

    infos = [p.to_dict() for p in get_host().list_plugins()]
    if cache is not None and all(i["loaded"] and not i["errors"] for i in infos):
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(infos), encoding="utf-8")
            tmp.replace(cache)
        except OSError:
            pass  # a read-only home: list without caching
    return infos


def _cache_dir() -> Path:
    base = os.environ.get("AGENTSYNTH_CACHE_DIR")
    return Path(base) if base else Path.home() / ".cache" / "agentsynth"


def _fingerprint() -> str | None:
    """A digest of what decides the listing; None when it cannot be known without importing."""
    import importlib_metadata

    h = hashlib.sha256()
    for name in ("AGENTSYNTH_LOAD_PLUGINS", "AGENTSYNTH_DISABLE_PLUGINS", "AGENTSYNTH_DISABLE_PLUGIN_AUTOLOAD"):
        h.update(f"{name}={os.environ.get(name, '')}\n".encode())
    from .. import __version__

    h.update(f"kernel={__version__}\n".encode())
    seen: set[str] = set()
    for ep in sorted(importlib_metadata.entry_points(group="agentsynth"), key=lambda e: (e.name, e.value)):
        dist = ep.dist
        # the dist-info folder's name holds name and version: no METADATA to parse
        where = str(getattr(dist, "_path", "")) if dist is not None else ""
        h.update(f"{ep.name}={ep.value}@{where}\n".encode())
        if dist is None or where in seen:
            continue
        seen.add(where)
        source = _editable_source(dist)
        if source is not None:
            if (source / "agentsynth_kernel").is_dir():  # the kernel: only its own package registers
                source = source / "agentsynth_kernel"
            h.update(_tree_stamp(source).encode())
        else:  # an ordinary install: its RECORD lists every file with its hash
            record = dist.read_text("RECORD") or ""
            h.update(hashlib.sha256(record.encode()).digest())
    return h.hexdigest()[:32]


def _editable_source(dist: Any) -> Path | None:
    """The source directory of an editable install (``pip install -e``), from its direct_url.json."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not (data.get("dir_info") or {}).get("editable"):
        return None
    url = str(data.get("url", ""))
    return Path(url.removeprefix("file://")) if url.startswith("file://") else None


def _tree_stamp(root: Path) -> str:
    """mtimes and sizes of the Python and YAML files under an editable source (pack.yaml files are
    registered too), skipping tests and virtual environments: any edit changes the stamp."""
    parts = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in ("tests", ".nox", ".venv", "node_modules", "__pycache__", ".git")
                   and not d.startswith(".")]
        for name in files:
            if name.endswith((".py", ".yaml", ".yml", ".toml")):
                try:
                    st = os.stat(os.path.join(directory, name))
                except OSError:
                    continue
                parts.append(f"{directory}/{name}:{st.st_mtime_ns}:{st.st_size}")
    parts.sort()
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
