"""The typed contract stays in step with itself: the closed sets of kinds agree where the kernel
names them twice, and the mypy configuration names only modules that exist."""

from __future__ import annotations

import importlib.util
import tomllib
import typing
from pathlib import Path

from agentsynth_kernel import hookspecs
from agentsynth_kernel.plugins import KINDS, ComponentKind
from agentsynth_kernel.records import ERROR_KINDS, ErrorKind, Status, is_error_kind
from agentsynth_kernel.report import INFRA_KINDS

ROOT = Path(__file__).resolve().parents[1]


def test_every_component_kind_has_its_register_hook():
    assert set(KINDS) == set(typing.get_args(ComponentKind))
    for kind, hook in KINDS.items():
        plural = kind.removesuffix("y") + "ies" if kind.endswith("y") else kind + "s"
        assert hook == f"register_{plural}" and callable(getattr(hookspecs, hook)), kind


def test_infrastructure_kinds_are_error_kinds():
    assert set(INFRA_KINDS) <= ERROR_KINDS, set(INFRA_KINDS) - ERROR_KINDS
    assert "agent" in ERROR_KINDS and "agent" not in INFRA_KINDS  # the agent failing is a result, not infra
    assert set(typing.get_args(Status)) == {"passed", "failed", "error", "unverified"}


def test_is_error_kind_accepts_the_literal_and_nothing_else():
    assert all(is_error_kind(kind) for kind in typing.get_args(ErrorKind))
    assert not any(is_error_kind(value) for value in ("database", "Provider", None, 3, b"provider"))


def test_the_mypy_overrides_name_modules_that_exist():
    """A module renamed or split (spec.py -> spec/, llm.py -> llm/) must leave the lists with it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["strict"] is True
    for override in config.get("overrides", []):
        modules = override["module"] if isinstance(override["module"], list) else [override["module"]]
        for module in modules:
            if not module.startswith("agentsynth_kernel"):
                continue  # third-party names (optional dependencies)
            assert importlib.util.find_spec(module.removesuffix(".*")) is not None, module
