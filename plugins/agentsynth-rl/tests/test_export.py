"""``agentsynth pack export``: what the verifiers and OpenEnv packages contain, and how bad input
fails. (The exported packages installed in fresh venvs and driven by the real libraries are in
test_export_install.py.)"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from agentsynth_kernel.cli import LazyGroup, cli, main
from agentsynth_rl.export import ExportError, export_pack


def _compile_all(root: Path) -> None:
    for file in root.rglob("*.py"):
        compile(file.read_text(), str(file), "exec")  # a SyntaxError fails the test with the file named


def test_verifiers_export_is_a_package_that_names_its_pack_and_requirements(pack, host, tmp_path):
    done = export_pack(pack, "verifiers", tmp_path / "out", host=host, require=("agentsynth-kv-tests>=1",))
    out = tmp_path / "out"
    assert (done.distribution, done.module, done.split) == ("agentsynth-env-kvpack", "agentsynth_env_kvpack", "train")
    project = tomllib.loads((out / "pyproject.toml").read_text())["project"]
    assert project["name"] == "agentsynth-env-kvpack"
    deps = project["dependencies"]
    assert deps[0] == "verifiers>=0.4" and "agentsynth-kv-tests>=1" in deps
    assert any(d.startswith("agentsynth>=") for d in deps) and any(d.startswith("agentsynth-rl[verifiers]>=") for d in deps)
    module = out / "agentsynth_env_kvpack"
    init = (module / "__init__.py").read_text()
    # verifiers 0.4 finds the taskset, harness and env through __all__; the issue's load_environment is there too
    assert '__all__ = ["KvpackTaskset", "KvpackHarness", "KvpackEnv", "load_environment"]' in init
    assert "PACK_IS_PATH = True" in init and f'PACK_HASH = "{pack.content_hash}"' in init
    # a pack from a path travels inside the package, byte for byte
    assert (module / "pack" / "pack.yaml").read_text() == (pack.base_dir / "pack.yaml").read_text()
    info = json.loads((module / "pack.json").read_text())
    assert info["split"] == "train" and info["pack_hash"] == pack.content_hash
    assert info["splits"] == {"test": 2, "train": 3}
    _compile_all(out)


def test_openenv_export_has_the_server_layout_openenv_validates(pack, host, tmp_path):
    pytest.importorskip("openenv.cli._validation")
    from openenv.cli._validation import get_deployment_modes, validate_multi_mode_deployment

    out = tmp_path / "oe"
    export_pack(pack, "openenv", out, host=host, split="test", require=("agentsynth-kv-tests",))
    for name in ("openenv.yaml", "pyproject.toml", "__init__.py", "client.py", "models.py", "server/app.py",
                 "server/Dockerfile", "server/requirements.txt", "pack/pack.yaml", "pack.json"):
        assert (out / name).is_file(), name
    project = tomllib.loads((out / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"server": "agentsynth_openenv_kvpack.server.app:main"}
    assert "openenv-core>=0.2.2" in project["dependencies"]
    ok, issues = validate_multi_mode_deployment(out)
    # everything OpenEnv checks but the lock file, which needs the dependencies to resolve from an index
    assert issues == ["Missing uv.lock - run 'uv lock' to generate it"], issues
    assert get_deployment_modes(out)["docker"] is True
    app = (out / "server" / "app.py").read_text()
    assert 'SPLIT = os.environ.get("AGENTSYNTH_SPLIT", "test")' in app  # asked for test: it says so
    assert "ENV AGENTSYNTH_SPLIT=test" in (out / "server" / "Dockerfile").read_text()
    _compile_all(out)


def test_a_plugin_without_a_distribution_must_be_named(pack, host, tmp_path):
    with pytest.raises(ExportError, match=r"plugin 'kv-tests', which is not an installed distribution.*--require"):
        export_pack(pack, "verifiers", tmp_path / "x", host=host)


def test_bad_input_fails_with_a_clear_message(pack, host, tmp_path):
    with pytest.raises(ExportError, match="unknown format 'gym'; expected one of verifiers, openenv"):
        export_pack(pack, "gym", tmp_path / "x", host=host)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="is not empty"):
        export_pack(pack, "verifiers", busy, host=host, require=("x",))
    assert (busy / "keep.txt").read_text() == "mine"
    with pytest.raises(ExportError, match="not a valid distribution name"):
        export_pack(pack, "verifiers", tmp_path / "y", host=host, name="bad name!", require=("x",))
    with pytest.raises(ValueError, match="split: expected one of"):
        export_pack(pack, "verifiers", tmp_path / "z", host=host, split="dev", require=("x",))
    # --force replaces an earlier export in place
    first = export_pack(pack, "verifiers", tmp_path / "again", host=host, require=("x",))
    second = export_pack(pack, "verifiers", tmp_path / "again", host=host, require=("x",), force=True)
    assert first.files == second.files


def test_the_commands(pack, host, tmp_path, capsys):
    # `agentsynth rl export` and `agentsynth pack export` (added to the kernel's pack group)
    with pytest.raises(SystemExit) as exc:
        main(["rl", "export", str(pack.base_dir), "--format", "gym", "--out", str(tmp_path / "a")])
    assert exc.value.code == 2 and "unknown format 'gym'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["rl", "export", "no-such-pack", "--format", "verifiers", "--out", str(tmp_path / "b")])
    assert exc.value.code == 2 and "no such pack" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["rl", "export", str(pack.base_dir), "--format", "verifiers", "--out", str(tmp_path / "c")])
    assert exc.value.code == 1 and "--require DIST" in capsys.readouterr().err
    assert main(["rl", "export", str(pack.base_dir), "--format", "openenv", "--out", str(tmp_path / "d"),
                 "--require", "agentsynth-kv-tests"]) is None
    assert "wrote openenv package agentsynth-openenv-kvpack (train split" in capsys.readouterr().out
    assert (tmp_path / "d" / "server" / "app.py").is_file()
    LazyGroup.load_plugin_commands(cli)  # plugin commands are loaded (the kernel loads them on a miss)
    pack_group = cli.get_command(None, "pack")  # type: ignore[arg-type]
    assert "export" in pack_group.commands
    assert main(["pack", "export", "--help"]) == 0
    assert "verifiers|openenv" in capsys.readouterr().out
