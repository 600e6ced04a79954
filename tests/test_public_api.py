"""The public API is what ``agentsynth_kernel`` exports: every plugin here uses only that (and the
test kits), the names resolve, and the type checkers' view of them is the same list."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import agentsynth_kernel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import public_imports  # noqa: E402


def test_every_public_name_resolves_to_the_module_that_defines_it():
    for names in agentsynth_kernel.PUBLIC.values():
        for name in names:
            value = getattr(agentsynth_kernel, name)
            assert value is not None, name
    assert len(agentsynth_kernel.__all__) == len(set(agentsynth_kernel.__all__)), "a name exported twice"


def test_the_type_checking_imports_are_the_public_names():
    tree = ast.parse((ROOT / "agentsynth_kernel" / "__init__.py").read_text(encoding="utf-8"))
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    seen: dict[str, set[str]] = {}
    for node in guarded.body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1
        seen.setdefault(node.module or "", set()).update(a.name for a in node.names)
    assert seen == {m: set(names) for m, names in agentsynth_kernel.PUBLIC.items()}


def test_importing_the_package_imports_nothing_else():
    code = "import sys, agentsynth_kernel; print(sorted(m for m in sys.modules if m.startswith('agentsynth_kernel.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['agentsynth_kernel.lazy']"  # the first-use mechanism itself (stdlib only)


def test_no_plugin_imports_a_kernel_name_that_is_not_public():
    public = set(agentsynth_kernel.__all__)
    offenders = []
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        if ".nox" in path.parts or "_template" in path.parts:
            continue
        for line, module, names, _ in public_imports.private_imports(path, public):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: from {module} import {', '.join(names)}")
    assert not offenders, ("plugins may import only public kernel names (agentsynth_kernel.__all__, the test kits); "
                           "run `python scripts/public_imports.py` to rewrite the public ones:\n" + "\n".join(offenders))


@pytest.mark.parametrize("source, expected", [
    ("from agentsynth_kernel.spec import Pack, load_pack\n", []),
    ("from agentsynth_kernel.spec import _structured\n", ["agentsynth_kernel.spec"]),
    ("import agentsynth_kernel.engine\n", ["agentsynth_kernel.engine"]),
    ("from agentsynth_kernel.testing import ScriptedLLMServer\n", []),
    ("from agentsynth_kernel import Pack, plugins\n", ["agentsynth_kernel"]),
])
def test_the_checker_catches_private_imports(tmp_path, source, expected):
    path = tmp_path / "mod.py"
    path.write_text(source)
    found = public_imports.private_imports(path, set(agentsynth_kernel.__all__))
    fixable = [m for _, m, _, fix in found if not fix]
    assert fixable == expected


def test_lazy_exports_import_a_name_on_first_use_only(tmp_path):
    pkg = tmp_path / "lazypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from agentsynth_kernel import lazy_exports\n"
                                     "__getattr__, __dir__ = lazy_exports(__name__, {'Thing': 'heavy', 'heavy': None})\n")
    (pkg / "heavy.py").write_text("Thing = object()\n")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import lazypkg\n"
            "before = 'lazypkg.heavy' in sys.modules\n"
            "thing = lazypkg.Thing\n"
            "print(before, 'lazypkg.heavy' in sys.modules, thing is sys.modules['lazypkg.heavy'].Thing,\n"
            "      'Thing' in vars(lazypkg), lazypkg.heavy is sys.modules['lazypkg.heavy'], 'Thing' in dir(lazypkg))\n"
            "try:\n    lazypkg.nothing\nexcept AttributeError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["False True True True True True", "module 'lazypkg' has no attribute 'nothing'"]
