"""The README's examples run as written (on the core pack: skipped without agentsynth-sql)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from agentsynth_kernel.cli import main

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert match, f"README has no section {title!r}"
    return match.group(1)


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def test_the_gymnasium_example_earns_the_verdict(core):
    code = blocks(section("Gymnasium"), "python")[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md#Gymnasium", "exec"), {})
    assert out.getvalue().startswith("1.0 passed [")


def test_the_export_commands_write_their_packages(core, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    commands = [line for line in blocks(section("Exports: verifiers and OpenEnv packages"), "bash")[0].splitlines()
                if line.startswith("agentsynth ")]
    assert len(commands) == 3
    for command in commands:
        if command.startswith("agentsynth pack export"):
            from agentsynth_kernel.cli import LazyGroup, cli

            LazyGroup.load_plugin_commands(cli)  # `pack export` lives in the kernel's pack group
        assert main(shlex.split(command.split("#")[0])[1:]) is None, command
    assert (tmp_path / "exports/core-vf/agentsynth_env_core/__init__.py").is_file()
    assert (tmp_path / "exports/core-oe/server/Dockerfile").is_file()
    with pytest.raises(SystemExit):  # a second export into the same directory needs --force
        main(["pack", "export", "core", "--format", "openenv", "--out", "exports/core-oe"])


def test_the_multi_turn_example_talks_to_the_user_then_earns_the_verdict(host, monkeypatch):
    pytest.importorskip("agentsynth_sql")
    monkeypatch.chdir(Path(__file__).resolve().parents[3])  # the example loads the support pack by path
    code = blocks(section("Multi-turn tasks (a simulated user)"), "python")[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md#Multi-turn", "exec"), {})
    assert out.getvalue().splitlines() == ["It's under sam@example.com. user False", "1.0 True passed"]
