"""``agentsynth pack export PACK --format verifiers|openenv --out DIR``: a pack as an installable
package for another RL stack.

- ``verifiers``: a verifiers 0.4+ environment package (``vf-eval <name>``, the Environments
  Hub): ``__all__`` exports the pack's ``vf.Taskset`` and the harness it runs with
  (:mod:`agentsynth_rl.verifiers_env`), and ``load_environment(**kwargs)`` returns the ``vf.Env``.
- ``openenv``: the OpenEnv server layout (``openenv.yaml``, ``server/app.py`` with ``main()``,
  ``server/Dockerfile``, ``client.py``, ``models.py``), served by :mod:`agentsynth_rl.serve`.

Both depend on the published distributions (``agentsynth``, ``agentsynth-rl`` with the right
extra, and the plugins that provide the pack and its environment and checker types). A pack
registered by a plugin is named (the plugin ships it); a pack from a path is copied into the
package. Every export serves the pack's train split unless asked for another one, and records
the pack's content hash so a changed pack is noticed when the package loads it.
"""

from __future__ import annotations

import json
import keyword
import re
import shutil
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import Pack, PluginHost, get_host

from .env import resolve_pack, split_tasks

FORMATS = ("verifiers", "openenv")


class ExportError(ValueError):
    """The export cannot be written (bad name, unknown format, a type no distribution provides)."""


@attrs.frozen
class Exported:
    """What was written: the directory, the distribution and module names, its requirements."""

    out: Path
    format: str
    distribution: str
    module: str
    requires: list[str]
    files: list[str]
    pack_id: str
    split: str


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def requirements(pack: Pack, host: PluginHost, extra: str, also: tuple[str, ...] = ()) -> list[str]:
    """The distributions the package needs: the kernel, agentsynth-rl[extra], and the plugin of
    the pack (when registered) and of every environment and checker type it uses."""
    needed: dict[str, str] = {}  # plugin name -> where it is needed (for the error)
    registered = host.registry["pack"].get(pack.id)
    if registered is not None and Path(registered.factory).resolve() == pack.base_dir:
        needed[registered.plugin] = f"pack {pack.id!r}"
    specs = [("environment", pack.environment)] if pack.environment is not None else []
    for task in pack.tasks:
        specs.append(("environment", pack.task_environment(task)))
        specs += [("checker", c) for c in pack.task_checkers(task)]
    for kind, spec in specs:
        if spec is not None and spec.type:
            needed.setdefault(host.get(kind, spec.type).plugin, f"{kind} type {spec.type!r}")
    dists: dict[str, str] = {"agentsynth": f"agentsynth>={_version('agentsynth') or '0.1'}",
                             "agentsynth-rl": f"agentsynth-rl[{extra}]>={_version('agentsynth-rl') or '0.1'}"}
    missing = []
    for plugin, where in sorted(needed.items()):
        info = host.plugins.get(plugin)
        dist = info.distribution if info is not None else ""
        version = _version(dist) if dist else ""
        if not version:  # registered in-process (a test, a notebook): no distribution to depend on
            missing.append(f"{where} comes from plugin {plugin!r}, which is not an installed distribution")
            continue
        dists.setdefault(dist, f"{dist}>={version}")
    if missing and not also:
        raise ExportError("; ".join(missing) + ": name the distribution(s) with --require DIST")
    out = list(dists.values())
    out += [r for r in also if r not in out]
    return out


_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")


def _names(pack: Pack, fmt: str, name: str | None) -> tuple[str, str]:
    dist = name or (f"agentsynth-env-{pack.id}" if fmt == "verifiers" else f"agentsynth-openenv-{pack.id}")
    if not _NAME_RE.match(dist):
        raise ExportError(f"--name: {dist!r} is not a valid distribution name (letters, digits, '.', '_', '-')")
    module = re.sub(r"[^A-Za-z0-9_]", "_", dist).lower()
    if not module.isidentifier() or keyword.iskeyword(module):
        raise ExportError(f"--name: {dist!r} does not make a Python module name (got {module!r})")
    return dist, module


def _class_prefix(pack: Pack) -> str:
    prefix = "".join(p.capitalize() for p in re.split(r"[^A-Za-z0-9]+", pack.id) if p) or "Pack"
    return prefix if prefix[0].isalpha() else f"Pack{prefix}"


def _pkg_version(pack: Pack) -> str:
    """The pack's version when it is a plain release number, else 0.1.0."""
    return pack.version if re.match(r"^[0-9]+(\.[0-9]+)*$", pack.version) else "0.1.0"


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def export_pack(pack_ref: Pack | str | Path, fmt: str, out: str | Path, *, name: str | None = None,
                split: str = "train", force: bool = False, require: tuple[str, ...] = (),
                host: PluginHost | None = None) -> Exported:
    """Write ``pack_ref`` as an installable ``fmt`` package into ``out`` (see the module doc).
    ``split`` is what the package serves by default (train unless asked); ``out`` must be
    empty or absent unless ``force``."""
    if fmt not in FORMATS:
        raise ExportError(f"--format: unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    host = host or get_host()
    pack = resolve_pack(pack_ref, host)
    split_tasks(pack, split)  # a split with no task is an error now, not when the package loads
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out: {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ExportError(f"--out: {out} is not empty (pass --force to overwrite the export in it)")
    dist, module = _names(pack, fmt, name)
    requires = requirements(pack, host, "verifiers" if fmt == "verifiers" else "openenv", tuple(require))
    registered = host.registry["pack"].get(pack.id)
    by_name = registered is not None and Path(registered.factory).resolve() == pack.base_dir
    writer = _write_verifiers if fmt == "verifiers" else _write_openenv
    root = out / module if fmt == "verifiers" else out
    if force and out.is_dir():
        for stale in (out / module, out / "server", out / "pack"):
            if stale.is_dir():
                shutil.rmtree(stale)
    root.mkdir(parents=True, exist_ok=True)
    if not by_name:  # a pack from a path travels inside the package
        shutil.copytree(pack.base_dir, root / "pack", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                        dirs_exist_ok=True)
    info = {"pack": pack.id, "pack_hash": pack.content_hash, "pack_version": pack.version,
            "pack_ref": pack.id if by_name else "pack", "pack_is_path": not by_name, "split": split,
            "splits": {s: sum(t.split == s for t in pack.tasks) for s in sorted({t.split for t in pack.tasks})},
            "format": fmt, "distribution": dist, "requires": requires,
            "exported_by": {"agentsynth": _version("agentsynth"), "agentsynth-rl": _version("agentsynth-rl")}}
    (root / "pack.json").write_text(json.dumps(info, indent=2) + "\n")
    writer(out, pack, dist, module, requires, info)
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    return Exported(out, fmt, dist, module, requires, files, pack.id, split)


# --- verifiers ---------------------------------------------------------------------------------------


def _write_verifiers(out: Path, pack: Pack, dist: str, module: str, requires: list[str], info: dict[str, Any]) -> None:
    prefix = _class_prefix(pack)
    ref = info["pack_ref"]
    (out / "pyproject.toml").write_text(f"""\
[build-system]
requires = ["hatchling>=1.24"]
build-backend = "hatchling.build"

[project]
name = "{dist}"
version = "{_pkg_version(pack)}"
description = {json.dumps(f"agentsynth pack {pack.id!r} as a verifiers environment: rewards are the world's verdicts")}
requires-python = ">=3.11"
dependencies = {_toml_list(["verifiers>=0.4", *requires])}

[tool.hatch.build.targets.wheel]
packages = ["{module}"]
""")
    (out / module / "__init__.py").write_text(f'''\
"""agentsynth pack {pack.id!r} as a verifiers environment (exported by agentsynth-rl).

``vf-eval {dist}`` runs it; ``load_environment(**kwargs)`` returns the ``vf.Env``. The reward
is the pack's checkers' verdict of each rollout's own world: 1.0 if every checker passed, else
0.0 (``reward="score"``: the mean checker score). Serves the {info["split"]!r} split unless
``split=`` says otherwise; every trace's task data names its split and seed.
"""

from typing import Any

from agentsynth_rl.verifiers_env import PackEnv, PackHarness, PackTaskset
from agentsynth_rl.verifiers_env import load_environment as _load_environment

TASKSET_ID = "{dist}"
DEFAULT_SPLIT = "{info["split"]}"


class {prefix}Taskset(PackTaskset):
    """The tasks of pack {pack.id!r}, one fresh world per rollout."""

    PACK = {json.dumps(ref)}
    PACK_IS_PATH = {info["pack_is_path"]}
    PACK_HASH = "{pack.content_hash}"


class {prefix}Harness(PackHarness):
    """The chat loop this environment runs with: the world's tools and nothing else."""


class {prefix}Env(PackEnv):
    """One agent per episode; its chat loop runs locally unless --env.agent.runtime says otherwise."""


def load_environment(**kwargs: Any) -> Any:
    """The verifiers ``Env`` over this pack; ``kwargs`` go to the taskset's config
    (``split``, ``repeat``, ``seed``, ``reward``, ``max_steps``)."""
    kwargs.setdefault("split", DEFAULT_SPLIT)
    return _load_environment(TASKSET_ID, **kwargs)


__all__ = ["{prefix}Taskset", "{prefix}Harness", "{prefix}Env", "load_environment"]
''')
    (out / "README.md").write_text(f"""\
# {dist}

agentsynth pack `{pack.id}` ({pack.description or "no description"}) as a
[verifiers](https://github.com/PrimeIntellect-ai/verifiers) environment, exported by
`agentsynth pack export {pack.id} --format verifiers`.

```bash
pip install {dist}          # or: pip install -e .
vf-eval {dist} -m MODEL --client.base-url URL --no-push -n 5
```

```python
from {module} import load_environment
env = load_environment(split="train", repeat=4)   # a verifiers.v1 Env
```

Each rollout gets a fresh, seeded world; the model sees the world's own tools (over MCP) and
nothing else. **Reward**: the pack's checkers read the world's end state when the model stops
(its last reply is the final answer): `1.0` if every checker passed, else `0.0`
(`--env.taskset.reward score`: the mean checker score). A rollout whose world or checker failed
is an error, not a `0`. Serves the `{info["split"]}` split unless `--env.taskset.split test|all`;
every trace's task data carries `task_id`, `split` and `seed`.

A task with a simulated user (`user:`) is a conversation: the model talks to the user through the
`message_user(message)` tool (its result is the user's reply; the user's own tools are not
listed), and the verdict comes once the user ended the talk, or when the model stops (its last
reply is its last message to the user). A failed simulated user is an errored rollout, not a `0`.

Pack content hash at export: `{pack.content_hash}`.
""")


# --- OpenEnv ---------------------------------------------------------------------------------------------


def _write_openenv(out: Path, pack: Pack, dist: str, module: str, requires: list[str], info: dict[str, Any]) -> None:
    prefix = _class_prefix(pack)
    server = out / "server"
    server.mkdir(exist_ok=True)
    pack_expr = ('str(Path(__file__).resolve().parent.parent / "pack")' if info["pack_is_path"]
                 else json.dumps(info["pack_ref"]))
    (out / "openenv.yaml").write_text(f"""\
spec_version: 1
name: {dist}
type: space
runtime: fastapi
app: server.app:app
port: 8000
""")
    (out / "pyproject.toml").write_text(f"""\
[build-system]
requires = ["setuptools>=68", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "{_pkg_version(pack)}"
description = {json.dumps(f"agentsynth pack {pack.id!r} as an OpenEnv environment: rewards are the world's verdicts")}
requires-python = ">=3.11"
dependencies = {_toml_list(["openenv-core>=0.2.2", *requires])}

[project.scripts]
server = "{module}.server.app:main"

[tool.setuptools]
include-package-data = true
packages = ["{module}", "{module}.server"]
package-dir = {{ "{module}" = ".", "{module}.server" = "server" }}

[tool.setuptools.package-data]
"{module}" = ["pack.json", "openenv.yaml", "pack/**/*"]
""")
    (out / "models.py").write_text(f'''\
"""The action and observation of pack {pack.id!r} (agentsynth_rl.serve)."""

from agentsynth_rl.serve import PackAction as {prefix}Action
from agentsynth_rl.serve import PackObservation as {prefix}Observation

__all__ = ["{prefix}Action", "{prefix}Observation"]
''')
    (out / "client.py").write_text(f'''\
"""OpenEnv client for pack {pack.id!r}: ``with {prefix}Env(base_url=...).sync() as env: ...``."""

from agentsynth_rl.serve import PackEnvClient


class {prefix}Env(PackEnvClient):
    """One WebSocket session = one agent's episodes, each in a fresh world."""


__all__ = ["{prefix}Env"]
''')
    (out / "__init__.py").write_text(f'''\
"""agentsynth pack {pack.id!r} as an OpenEnv environment (exported by agentsynth-rl)."""

from .client import {prefix}Env
from .models import {prefix}Action, {prefix}Observation

__all__ = ["{prefix}Action", "{prefix}Env", "{prefix}Observation"]
''')
    (server / "__init__.py").write_text('"""The OpenEnv server of this pack."""\n')
    (server / "app.py").write_text(f'''\
"""FastAPI app serving agentsynth pack {pack.id!r} as an OpenEnv environment.

Endpoints are OpenEnv's (``/reset``, ``/step``, ``/state``, ``/schema``, ``/health``, ``/ws``); each
WebSocket session has its own environment and its own fresh world per reset. The reward at the
end of an episode is the pack's checkers' verdict of the world's end state (1.0 / 0.0).

    uvicorn server.app:app --host 0.0.0.0 --port 8000       # or: server --port 8000
    AGENTSYNTH_SPLIT=test server                             # held-out tasks, only when asked
"""

import os
from pathlib import Path

from agentsynth_rl.serve import make_app

PACK = {pack_expr}
SPLIT = os.environ.get("AGENTSYNTH_SPLIT", "{info["split"]}")
MAX_STEPS = int(os.environ.get("AGENTSYNTH_MAX_STEPS", "30"))
MAX_SESSIONS = int(os.environ.get("AGENTSYNTH_MAX_SESSIONS", "64"))

app = make_app(PACK, split=SPLIT, max_steps=MAX_STEPS, max_concurrent_envs=MAX_SESSIONS)


def main(host: str = "0.0.0.0", port: int = 8000) -> None:
    """Run the server (the ``server`` console script, ``python -m {module}.server.app``)."""
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description="agentsynth pack {pack.id} as an OpenEnv server")
    parser.add_argument("--host", default=host)
    parser.add_argument("--port", type=int, default=port)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
''')
    (server / "requirements.txt").write_text("\n".join(["openenv-core>=0.2.2", *requires]) + "\n")
    (server / "Dockerfile").write_text(f"""\
# agentsynth pack {pack.id!r} as an OpenEnv environment.
#   docker build -t {dist}:latest -f server/Dockerfile .
#   docker run -p 8000:8000 {dist}:latest
# Wheels in ./wheels (e.g. unpublished agentsynth builds) are preferred over the index.
FROM python:3.11-slim

WORKDIR /app/env
COPY . /app/env
RUN mkdir -p /app/env/wheels \\
 && pip install --no-cache-dir --find-links /app/env/wheels /app/env \\
 && useradd --create-home --uid 1000 openenv
USER openenv
ENV AGENTSYNTH_SPLIT={info["split"]}
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \\
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)"
CMD ["python", "-m", "uvicorn", "{module}.server.app:app", "--host", "0.0.0.0", "--port", "8000"]
""")
    (out / "README.md").write_text(f"""\
# {dist}

agentsynth pack `{pack.id}` ({pack.description or "no description"}) as an
[OpenEnv](https://github.com/meta-pytorch/OpenEnv) environment, exported by
`agentsynth pack export {pack.id} --format openenv`.

```bash
pip install .                 # then: server --port 8000   (or python -m {module}.server.app)
docker build -t {dist} -f server/Dockerfile . && docker run -p 8000:8000 {dist}
```

```python
from {module} import {prefix}Action, {prefix}Env

with {prefix}Env(base_url="http://127.0.0.1:8000").sync() as env:
    first = env.reset(seed=0)                       # observation: content, tools, messages, split
    step = env.step({prefix}Action(tool="...", arguments={{}}))
    end = env.step({prefix}Action(answer="done"))   # end.reward: the checkers' verdict
```

An action is exactly one of `tool` (+ `arguments`), `tool_calls` (OpenAI shape) or `answer`. On a
task with a simulated user (`multi_turn` in the reset observation) an `answer` is a message to the
user: its reply is the observation (`speaker == "user"`, not `done`) until the user ends the talk.
**Reward**: `0.0` until the episode ends; then `1.0` if every checker of the task passed on the
world's end state, else `0.0`. The server serves the `{info["split"]}` split
(`AGENTSYNTH_SPLIT=test` for held-out tasks); every observation names its `split` and `seed`.
Run `uv lock` once the dependencies resolve from your index, for `openenv validate`.

Pack content hash at export: `{pack.content_hash}`.
""")
