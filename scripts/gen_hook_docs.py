"""Write docs/hooks.md from the hookspec docstrings (the contract's reference page).

CI checks the page is current: tests/test_hookspecs.py regenerates it in memory and compares.
Run: python scripts/gen_hook_docs.py
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentsynth_kernel import hookspecs  # noqa: E402


def hook_names() -> list[str]:
    return [n for n, f in vars(hookspecs).items() if inspect.isfunction(f) and hasattr(f, "agentsynth_spec")]


def render() -> str:
    lines = [
        "# Plugin hook reference",
        "",
        "Generated from `agentsynth_kernel/hookspecs.py` by `scripts/gen_hook_docs.py`; do not edit by hand.",
        "",
        inspect.cleandoc(hookspecs.__doc__ or ""),
        "",
    ]
    for name in hook_names():
        fn = getattr(hookspecs, name)
        opts = fn.agentsynth_spec
        flags = [k for k in ("firstresult", "historic") if opts.get(k)]
        signature = str(inspect.signature(fn)).replace("'", "")
        lines += [f"## `{name}{signature}`", ""]
        if flags:
            lines += [f"*{', '.join(flags)}*", ""]
        lines += [inspect.cleandoc(fn.__doc__ or ""), ""]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    (ROOT / "docs" / "hooks.md").write_text(render(), encoding="utf-8")
    print("wrote docs/hooks.md")
