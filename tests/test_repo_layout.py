"""Every plugin distribution has the agreed shape, and the generated plugin table is current."""

from __future__ import annotations

import ast
import importlib.util
import shutil
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml") if not p.parent.name.startswith("_"))


def _generator():
    spec = importlib.util.spec_from_file_location("gen_plugin_table", ROOT / "scripts" / "gen_plugin_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_are_plugins():
    assert len(PLUGINS) >= 1


def test_plugin_table_is_current():
    assert (ROOT / "plugins" / "README.md").read_text(encoding="utf-8") == _generator().render(), (
        "plugins/README.md is stale: run `python scripts/gen_plugin_table.py`"
    )


@pytest.mark.parametrize("plugin", PLUGINS, ids=[p.name for p in PLUGINS])
def test_plugin_layout(plugin: Path):
    project = tomllib.loads((plugin / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == plugin.name
    assert any(dep.split(">")[0].split("=")[0].strip() == "agentsynth" for dep in project["dependencies"])
    entry_points = project["entry-points"]["agentsynth"]
    assert entry_points, "a plugin exposes at least one entry point in the 'agentsynth' group"
    package = plugin / ("agentsynth_" + plugin.name.removeprefix("agentsynth-").replace("-", "_"))
    assert package.is_dir() and (package / "metadata.py").is_file()
    assert (plugin / "README.md").is_file() and "```" in (plugin / "README.md").read_text(encoding="utf-8")
    assert list((plugin / "tests").glob("test_*.py")), "a plugin has its own tests"


@pytest.mark.parametrize("plugin", PLUGINS, ids=[p.name for p in PLUGINS])
def test_plugin_imports_no_other_plugin(plugin: Path):
    own = "agentsynth_" + plugin.name.removeprefix("agentsynth-").replace("-", "_")
    others = {"agentsynth_" + p.name.removeprefix("agentsynth-").replace("-", "_") for p in PLUGINS} - {own}
    for source in (plugin / own).rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in others, f"{source}: imports {name} (plugins import only the kernel)"


def test_template_scaffolds_a_plugin_with_the_agreed_layout(tmp_path):
    spec = importlib.util.spec_from_file_location("new_plugin", ROOT / "scripts" / "new_plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plugins_dir = tmp_path / "plugins"
    shutil.copytree(ROOT / "plugins" / "_template", plugins_dir / "_template")
    target = module.scaffold("weather_api", "A weather REST world", plugins_dir)
    test_plugin_layout(target)
    source = (target / "agentsynth_weather_api" / "plugin.py").read_text()
    assert "class WeatherApiEnvironment" in source and 'register("weather_api"' in source
    compile(source, "plugin.py", "exec")
    project = tomllib.loads((target / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["agentsynth"] == {"weather_api": "agentsynth_weather_api.plugin"}


def test_a_plugin_scaffolded_outside_the_repository_passes_its_tests_and_pack_validate(tmp_path):
    """What a new plugin author gets: `new_plugin.py NAME DESC --dest DIR`, `pip install -e .`,
    then pytest and `agentsynth pack validate NAME-demo` pass as generated."""
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "new_plugin.py"), "tide_tables", "Tide tables",
                          "--dest", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    plugin = tmp_path / "agentsynth-tide_tables"
    venv = tmp_path / "venv"
    uv = shutil.which("uv")
    if uv:
        subprocess.run([uv, "venv", "-q", str(venv)], check=True, timeout=120)
        install = [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python")]
    else:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        install = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*install, "-e", str(ROOT), "-e", f"{plugin}[test]"], check=True, timeout=600)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AGENTSYNTH_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("VIRTUAL_ENV", None)
    tests = subprocess.run([str(venv / "bin" / "pytest"), "-q", "-p", "no:cacheprovider"], cwd=plugin, env=env,
                           capture_output=True, text=True, timeout=300)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert "3 passed" in tests.stdout
    gates = subprocess.run([str(venv / "bin" / "agentsynth"), "pack", "validate", "tide_tables-demo", "--json", "-"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert gates.returncode == 0, gates.stdout[-3000:] + gates.stderr[-2000:]
    import json

    assert {g["name"]: g["status"] for g in json.loads(gates.stdout)["gates"]} == dict.fromkeys(
        ("schema", "unique-ids", "world-state-checkers", "oracle", "determinism", "floors", "robustness"), "pass")
