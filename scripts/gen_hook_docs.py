"""Write docs/hooks.md from the hookspec docstrings (the contract's reference page).

Sphinx roles in the docstrings (``:class:`~agentsynth_kernel.components.Environment```) become links
to the reference pages that scripts/gen_reference.py writes (which also writes this page).
CI checks the page is current: tests/test_hookspecs.py regenerates it in memory and compares.
Run: python scripts/gen_hook_docs.py
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentsynth_kernel import hookspecs  # noqa: E402

PAGE = "hooks.md"


def _reference() -> Any:
    """scripts/gen_reference.py (the role renderer and signatures), loaded from its file."""
    spec = importlib.util.spec_from_file_location("gen_reference", Path(__file__).resolve().parent / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules.get("gen_reference")
    if module is None or getattr(module, "__file__", None) != spec.origin:
        module = importlib.util.module_from_spec(spec)
        sys.modules["gen_reference"] = module
        spec.loader.exec_module(module)
    return module


def _linked_types(ref: Any, fn: Any) -> str:
    """Links to the reference entries of the documented types a hook's signature names."""
    names: list[str] = []
    annotations = [str(a) for a in getattr(fn, "__annotations__", {}).values()]
    for word in re.findall(r"[A-Za-z_][\w.]*", " ".join(annotations)):
        short = word.rsplit(".", 1)[-1]
        if short[:1].isupper() and short not in names and ref.resolve(word) is not None:
            names.append(short)
    return ", ".join(f"[`{n}`]({ref.link(PAGE, *ref.resolve(n))})" for n in names)


def hook_names() -> list[str]:
    return [n for n, f in vars(hookspecs).items() if inspect.isfunction(f) and hasattr(f, "agentsynth_spec")]


def render(unresolved: list[str] | None = None) -> str:
    """The page; cross-references that resolve to no reference page are listed in ``unresolved``."""
    ref = _reference()
    lines = [
        "# Plugin hook reference",
        "",
        "Generated from `agentsynth_kernel/hookspecs.py` by `scripts/gen_hook_docs.py`; do not edit by hand.",
        "",
        ref.render_doc(inspect.cleandoc(hookspecs.__doc__ or ""), PAGE, unresolved),
        "",
        "| hook | called |",
        "|---|---|",
    ]
    names = hook_names()
    for name in names:
        opts = getattr(hookspecs, name).agentsynth_spec
        called = ", ".join(k for k in ("firstresult", "historic") if opts.get(k)) or "every plugin is called"
        lines.append(f"| [`{name}`](#{ref.anchor(name)}) | {called} |")
    lines.append("")
    for name in names:
        fn = getattr(hookspecs, name)
        opts = fn.agentsynth_spec
        flags = [k for k in ("firstresult", "historic") if opts.get(k)]
        lines += ref.heading(2, f"`{name}{ref.signature_text(fn)}`", ref.anchor(name))
        if flags:
            lines += [f"*{', '.join(flags)}*", ""]
        types = _linked_types(ref, fn)
        if types:
            lines += [f"Types: {types}", ""]
        lines += [ref.render_doc(inspect.cleandoc(fn.__doc__ or ""), PAGE, unresolved), ""]
    return ref.scrub("\n".join(lines)).rstrip() + "\n"


if __name__ == "__main__":
    (ROOT / "docs" / "hooks.md").write_text(render(), encoding="utf-8")
    print("wrote docs/hooks.md")
