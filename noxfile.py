"""Sessions: tests (kernel, each plugin in its own venv, all together), lint, bench.

Plugins are found by globbing plugins/*/pyproject.toml: adding a plugin adds its
test session, with no list to maintain. Each plugin's venv holds only the
kernel and that plugin, so an undeclared import of another plugin fails.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PLUGINS = sorted(p.parent.name for p in ROOT.glob("plugins/*/pyproject.toml") if not p.parent.name.startswith("_"))
PACKS = sorted(p.parent.name for p in ROOT.glob("packs/*/pyproject.toml"))  # pack distributions (no code)

# llama-cpp-python (agentsynth-local) is source-only on PyPI: scripts/setup.sh builds its wheel once into
# this wheelhouse, and every venv installs it from there instead of compiling it again (6 min each)
_WHEELHOUSE = Path(os.environ.get("AGENTSYNTH_WHEELHOUSE", Path.home() / ".cache" / "agentsynth" / "wheels"))
if _WHEELHOUSE.is_dir():
    os.environ.setdefault("UV_FIND_LINKS", str(_WHEELHOUSE))
    os.environ.setdefault("PIP_FIND_LINKS", str(_WHEELHOUSE))

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True

TEST_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "PYTHONDONTWRITEBYTECODE": "1",
    # no test may reach a hub: the machines have no network beyond package registries
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
}


@nox.session(tags=["tests"])
def tests(session: nox.Session) -> None:
    """The kernel's tests, with a test plugin installed through a real entry point."""
    session.install("-e", ".[test,litellm]", "-e", "tests/testworld")
    session.run("pytest", "tests", "--ignore=tests/integration", *_junit("kernel"), *session.posargs, env=TEST_ENV)


def _test_with(plugin: str) -> list[str]:
    """Sibling plugins a plugin's tests need (``[tool.agentsynth] test-with = [...]`` in its pyproject):
    a composite world's pack runs sql and python worlds, although its code imports only the kernel."""
    data = tomllib.loads((ROOT / "plugins" / plugin / "pyproject.toml").read_text())
    names = data.get("tool", {}).get("agentsynth", {}).get("test-with", [])
    unknown = sorted(set(names) - set(PLUGINS) - set(PACKS))
    if unknown:
        raise ValueError(f"plugins/{plugin}/pyproject.toml: [tool.agentsynth] test-with names {unknown}, "
                         f"which are not plugins in plugins/ nor packs in packs/ (expected some of {PLUGINS + PACKS})")
    return [a for name in names for a in ("-e", f"plugins/{name}" if name in PLUGINS else f"packs/{name}")]


@nox.session(tags=["tests"])
@nox.parametrize("plugin", PLUGINS, ids=PLUGINS)
def plugin(session: nox.Session, plugin: str) -> None:
    """One plugin's tests in a venv with only the kernel, that plugin and the siblings it names as
    ``test-with`` (so an undeclared import of another plugin still fails)."""
    session.install("-e", ".[test]", "-e", f"plugins/{plugin}[test]", *_test_with(plugin))
    no_deps = _test_install_no_deps(plugin)
    if no_deps:  # e.g. bfcl-eval: the tests read its data files; its own dependencies (torch ...) are not needed
        session.install("--no-deps", *no_deps)
    session.run("pytest", f"plugins/{plugin}/tests", *_junit(plugin), *session.posargs, env=TEST_ENV)


def _test_install_no_deps(plugin: str) -> list[str]:
    """Packages a plugin's tests need without their dependencies (``[tool.agentsynth]
    test-install-no-deps = ["bfcl-eval==2026.3.23"]``): data-only use of a package whose own
    dependency set is huge."""
    data = tomllib.loads((ROOT / "plugins" / plugin / "pyproject.toml").read_text())
    names = data.get("tool", {}).get("agentsynth", {}).get("test-install-no-deps", [])
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"plugins/{plugin}/pyproject.toml: [tool.agentsynth] test-install-no-deps must be a list "
                         "of requirement strings")
    return names


@nox.session(tags=["tests"])
@nox.parametrize("pack", PACKS, ids=PACKS)
def pack(session: nox.Session, pack: str) -> None:
    """A pack distribution installed on its own (with the plugins it depends on) passes every gate
    of ``pack validate`` and its oracle's bench."""
    import re

    project = tomllib.loads((ROOT / "packs" / pack / "pyproject.toml").read_text())["project"]
    needs = [re.split(r"[\s<>=!~;\[]", dep, maxsplit=1)[0] for dep in project.get("dependencies", [])]
    local = [a for name in needs if (ROOT / "plugins" / name).is_dir() for a in ("-e", f"plugins/{name}")]
    session.install("-e", ".", *local, "-e", f"packs/{pack}")
    for name in project.get("entry-points", {}).get("agentsynth", {}):
        session.run("agentsynth", "pack", "validate", name, env=TEST_ENV)
        session.run("agentsynth", "bench", "--pack", name, "--policy", "oracle", "--min-pass-rate", "100%", "-q",
                    env=TEST_ENV)


@nox.session(tags=["tests"])
def together(session: nox.Session) -> None:
    """Every plugin installed at once: catches hook and name conflicts between plugins."""
    session.install("-e", ".[test,litellm]", *[a for p in PLUGINS for a in ("-e", f"plugins/{p}[test]")],
                    *[a for p in PACKS for a in ("-e", f"packs/{p}")])
    session.run("agentsynth", "plugins", env=TEST_ENV)
    session.run("pytest", "tests/integration", *_junit("together"), *session.posargs, env=TEST_ENV)


def _junit(name: str) -> list[str]:
    """CI collects every session's results into one closing line (scripts/junit_totals.py)."""
    return [f"--junitxml={ROOT / '.ci-results' / (name + '.xml')}"] if os.environ.get("CI") else []


@nox.session(tags=["lint", "tests"])
def lint(session: nox.Session) -> None:
    """ruff everywhere; mypy on the kernel (its config is in pyproject.toml)."""
    session.install("ruff", "mypy", "types-PyYAML", "-e", ".")
    session.run("ruff", "check", "agentsynth_kernel", "plugins", "tests", "benchmarks", "scripts", "noxfile.py")
    session.run("mypy")


@nox.session
def bench(session: nox.Session) -> None:
    """Performance scripts: benchmarks/bench_*.py write benchmarks/results/<name>.json, each plugin's
    bench/bench_*.py its bench/ folder. Every script runs even if one fails; the session fails at the end
    naming them. A script that needs what the machine lacks says so and exits 0."""
    from nox.command import CommandFailed

    # datasketch: the baseline bench_export measures MinHash dedup against; the judge's learned extra:
    # bench_route trains its verifier
    session.install("-e", ".[test,litellm]", *[a for p in PLUGINS for a in ("-e", f"plugins/{p}")], "datasketch",
                    "-e", "plugins/agentsynth-judge[learned]",
                    "-e", "tests/testworld")  # bench_store runs the kv test world
    # the kernel's, then each plugin's own bench/bench_*.py (they write next to themselves); the embedded
    # model's benchmark needs the model and runs in `nox -s real-llm`'s venv, not here
    plugin_scripts = [p for p in ROOT.glob("plugins/*/bench/bench_*.py") if p.parts[-3] != "agentsynth-local"]
    scripts = session.posargs or [*sorted(str(p) for p in (ROOT / "benchmarks").glob("bench_*.py")),
                                  *sorted(str(p) for p in plugin_scripts)]
    failed = []
    for script in scripts:
        try:
            session.run("python", script, env={**TEST_ENV, "AGENTSYNTH_BENCH_OUT": str(ROOT / "benchmarks" / "results")})
        except CommandFailed:
            failed.append(script)
    if failed:
        session.error(f"{len(failed)} of {len(scripts)} benchmark scripts failed: {', '.join(failed)}")


@nox.session(name="python-container")
def python_container(session: nox.Session) -> None:
    """The python world's heavy container tests (pack validate and the exploit kit on Podman, a real
    build-image): about 6 minutes, so not in ``-t tests``, whose python session runs the quick ones."""
    session.install("-e", ".[test]", "-e", "plugins/agentsynth-python[test]")
    session.run("pytest", "plugins/agentsynth-python/tests", "-k", "container", *session.posargs,
                env={**TEST_ENV, "AGENTSYNTH_PYTHON_CONTAINER_FULL": "1"})


@nox.session(name="real-llm")
def real_llm(session: nox.Session) -> None:
    """The real-model suite on the embedded model (agentsynth-local): bench core, judge score, synth
    forward and export through the command line. Minutes of CPU; not part of ``-t tests``."""
    plugins = ("agentsynth-local", "agentsynth-sql", "agentsynth-judge", "agentsynth-synth", "agentsynth-export",
               "agentsynth-generate")
    session.install("-e", ".[test]", *[a for p in plugins for a in ("-e", f"plugins/{p}[test]")])
    session.run("pytest", "plugins/agentsynth-local/tests", "-m", "real_llm", "-s", *_junit("real-llm"),
                *session.posargs, env={**TEST_ENV, "AGENTSYNTH_REAL_LLM": "1"})
    session.run("pytest", "plugins/agentsynth-generate/tests", "-m", "real_llm", "-s", *_junit("real-llm-generate"),
                *session.posargs, env={**TEST_ENV, "AGENTSYNTH_REAL_LLM": "1"})


@nox.session(name="rl-train", venv_backend="virtualenv")
def rl_train(session: nox.Session) -> None:
    """agentsynth-rl with the real GRPOTrainer (trl, transformers, torch on the CPU), the core pack and
    OpenEnv: every test of the plugin, the training ones included. Not part of ``-t tests``: torch is
    ~900 MB and a training test takes a minute. pip (not uv) so torch==2.13.0 is the CPU wheel on disk."""
    session.install("torch==2.13.0")
    session.install("-e", ".[test]", "-e", "plugins/agentsynth-sql", "-e", "plugins/agentsynth-rl[test,trl,openenv]")
    session.run("pytest", "plugins/agentsynth-rl/tests", *_junit("rl-train"), *session.posargs, env=TEST_ENV)


@nox.session(name="rl-export")
def rl_export(session: nox.Session) -> None:
    """agentsynth-rl's exports installed in fresh venvs (uv) and driven by the real verifiers and
    OpenEnv (~5 min; also part of ``rl-train``). Not part of ``-t tests``."""
    session.install("-e", ".[test]", "-e", "plugins/agentsynth-sql", "-e", "plugins/agentsynth-rl[test,openenv]")
    session.run("pytest", "plugins/agentsynth-rl/tests", "-m", "export", *_junit("rl-export"), *session.posargs,
                env=TEST_ENV)


if os.environ.get("CI"):
    nox.options.reuse_existing_virtualenvs = False
