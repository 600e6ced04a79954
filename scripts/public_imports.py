"""Rewrite plugin imports of public kernel names to the public namespace.

``from agentsynth_kernel.spec import Pack, load_pack`` becomes ``from agentsynth_kernel import Pack,
load_pack`` when every name is public (``agentsynth_kernel.__all__``); anything else is listed, not
changed, for a person to decide. ``python scripts/public_imports.py [--check] [PATHS...]``
(default: plugins/). tests/test_public_api.py fails on what it would list.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# modules plugins may import from besides the top level: test kits and the in-process command
ALLOWED_MODULES = {
    "agentsynth_kernel.testing": None,  # any name
    "agentsynth_kernel.testing.adversarial": None,
    "agentsynth_kernel.testing.server": None,
    "agentsynth_kernel.cli": {"main", "cli", "LazyGroup"},
}


def public_names() -> set[str]:
    sys.path.insert(0, str(ROOT))
    import agentsynth_kernel

    return set(agentsynth_kernel.__all__)


def private_imports(path: Path, public: set[str]) -> list[tuple[int, str, list[str], bool]]:
    """(line, module, names, fixable) for every import of a kernel submodule outside the public API."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            module = node.module
            if module == "agentsynth_kernel" or not module.startswith("agentsynth_kernel."):
                if module == "agentsynth_kernel":
                    names = [a.name for a in node.names if a.name not in public and a.name != "__version__"]
                    if names:
                        found.append((node.lineno, module, names, False))
                continue
            allowed = ALLOWED_MODULES.get(module, ...)
            names = [a.name for a in node.names]
            if allowed is None or (allowed is not ... and set(names) <= allowed):
                continue
            found.append((node.lineno, module, names, all(n in public for n in names)))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("agentsynth_kernel.") and alias.name not in ALLOWED_MODULES:
                    found.append((node.lineno, alias.name, [], False))
    return found


def rewrite(path: Path, public: set[str]) -> int:
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.ImportFrom) and node.module and node.level == 0
                and node.module.startswith("agentsynth_kernel.") and node.module not in ALLOWED_MODULES
                and all(a.name in public for a in node.names)):
            edits.append(node)
    for node in sorted(edits, key=lambda n: n.lineno, reverse=True):
        start, end = node.lineno - 1, node.end_lineno or node.lineno
        text = "".join(lines[start:end])
        lines[start:end] = [text.replace(f"from {node.module} import", "from agentsynth_kernel import", 1)]
    if edits:
        path.write_text("".join(lines), encoding="utf-8")
    return len(edits)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    targets = [Path(a).resolve() for a in argv if a != "--check"] or [ROOT / "plugins"]
    public = public_names()
    left = 0
    for target in targets:
        for path in sorted(target.rglob("*.py") if target.is_dir() else [target]):
            if ".nox" in path.parts or "_template" in path.parts:
                continue
            if not check:
                rewrite(path, public)
            for line, module, names, _ in private_imports(path, public):
                left += 1
                print(f"{path.relative_to(ROOT)}:{line}: {module} {', '.join(names)}")
    return 1 if left else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
