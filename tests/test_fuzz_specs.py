"""A corpus of malformed run specs and packs, generated here by mutating valid ones at every path.

Every case goes through the real command line (``agentsynth run``, in-process with click's
CliRunner, and a handful as real subprocesses) and must end with: a non-zero exit code, no
traceback and no "internal error", a message naming the file at fault, and within seconds.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from agentsynth_kernel import plugins as plugin_module
from agentsynth_kernel.cli import main
from agentsynth_kernel.spec import MAX_DEPTH
from conftest import KV_ORACLE, run_agentsynth

Path_ = tuple[Any, ...]

PACK: dict[str, Any] = {
    "id": "kvpack",
    "description": "two kv tasks",
    "version": "1",
    "environment": {"type": "kv", "initial": {"a": "1"}},
    "oracle": "oracle.py",
    "system_prompt": "Be brief.",
    "tasks": [
        {"id": "set-b", "instruction": "Set b to 2", "split": "test", "tier": "easy", "max_steps": 5,
         "checkers": [{"type": "kv_equals", "key": "b", "value": "2"}], "metadata": {"source": "fuzz"}},
        {"id": "del-a", "instruction": "Delete a", "split": "train",
         "checkers": [{"type": "kv_equals", "key": "a", "value": None},
                      {"type": "called_tool", "tool": "delete", "min_times": 1}]},
    ],
}

# The README's run spec, on the test world: a pack by path and every run setting.
SPEC: dict[str, Any] = {
    "pack": "pack", "split": "all", "policy": {"type": "oracle"}, "trials": 2, "seed": 0, "concurrency": 2,
    "timeout": 30.0, "max_steps": 5, "only": ["set-b", "del-a"], "budget": {"usd": 1.5, "tokens": 1000},
}

# Inline tasks with the llm and callable policies' parameters (only loaded, never run).
INLINE: dict[str, Any] = {
    "name": "inline", "environment": {"type": "kv"}, "oracle": "oracle.py",
    "tasks": [{"id": "t", "instruction": "Set b", "checkers": [
        {"type": "answer_contains", "text": ["done"], "case_sensitive": False},
        {"type": "kv_equals", "key": "b", "value": "2"}]}],
    "policy": {"type": "llm", "model": "openai/gpt-4o-mini", "max_turns": 5, "temperature": 0.0, "timeout": 30.0,
               "max_tokens": 256, "cache": True},
}
CALLABLE: dict[str, Any] = {**INLINE, "policy": {"type": "callable", "function": "agent.py:act"}}

FREE = ("metadata",)  # anything goes below these keys
WRONG_TYPES: dict[type, list[Any]] = {
    str: [5, [1], {"k": 1}],
    int: ["five", 2.5, [1], {"k": 1}, True],
    float: ["five", [1], {"k": 1}, True, float("nan")],
    bool: ["five", 3, [1]],
    type(None): [5, [1], {"k": 1}],
    list: [{"k": 1}, 7, "text"],
    dict: [[1], 7, "text"],
}
# A right type with a wrong value, where the value matters.
BAD_VALUES: dict[str, list[Any]] = {
    "trials": [0, -1, 10**9], "concurrency": [0, 10**6], "max_steps": [0, -2], "seed": [2**70],
    "timeout": [0, -1.0, float("inf"), float("nan")], "usd": [-1.0, float("nan")], "tokens": [-1],
    "split": ["dev", ""], "id": ["bad id", ""], "only": [["nope"]], "type": ["orcale", "kv_equal", ""],
    "max_turns": [0, -3], "temperature": [-0.5], "max_tokens": [0], "min_times": ["many"],
    "function": ["missing.py:act", "agent.py", "no_such_module_xyz:act", ":act"], "oracle": ["missing_oracle.py"],
    "pack": ["no-such-pack"], "tasks": [[]],
}
VALID = {"pack/missing:id", "inline/value:policy.timeout=inf"}  # a pack's id defaults to its folder; no llm timeout
REQUIRED = {("policy",), ("pack",), ("tasks",), ("environment",), ("id",), ("instruction",), ("type",), ("key",),
            ("tool",), ("model",), ("function",)}
SKIP_TYPES = {("tier", int), ("tier", float), ("text", str)}  # a tier may be a number, a text one string
BAD_REFERENCES = ["${AGS_FUZZ_UNSET}", "x ${AGS_FUZZ_UNSET} y", "${1bad}", "${unclosed", "${A:${B}}"]


def _walk(node: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            if key not in FREE:
                yield from _walk(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, (*path, i))


def _set(doc: Any, path: Path_, value: Any) -> Any:
    doc = copy.deepcopy(doc)
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return doc


def _delete(doc: Any, path: Path_) -> Any:
    doc = copy.deepcopy(doc)
    node = doc
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    return doc


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


def _label(path: Path_) -> str:
    return ".".join(str(p) for p in path) or "top"


def mutations(doc: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(label, mutated document or raw YAML text): each one invalid by construction."""
    for path, value in _walk(doc):
        key = next((p for p in reversed(path) if isinstance(p, str)), "")
        last = path[-1] if path else None
        if path:
            for wrong in WRONG_TYPES.get(type(value), []):
                if (key, type(wrong)) in SKIP_TYPES or (isinstance(last, int) and key == "checkers"
                                                        and isinstance(wrong, str)):
                    continue  # a checker may be given by name alone
                if key == "policy" and isinstance(wrong, str):
                    wrong = "five"  # a policy by name: an unknown one
                yield f"type:{_label(path)}={wrong!r}", _set(doc, path, wrong)
            if isinstance(last, str):
                for bad in BAD_VALUES.get(last, []):
                    if bad != value:
                        yield f"value:{_label(path)}={bad!r}", _set(doc, path, bad)
                if (last,) in REQUIRED:
                    yield f"missing:{_label(path)}", _delete(doc, path)
                if path == ("tasks", 1, "id"):
                    yield "value:duplicate-task-id", _set(doc, path, doc["tasks"][0]["id"])
            if isinstance(value, str):
                for reference in BAD_REFERENCES:
                    yield f"ref:{_label(path)}={reference}", _set(doc, path, reference)
            yield f"deep:{_label(path)}", _set(doc, path, _nested(MAX_DEPTH + 5))
        if isinstance(value, dict) and key not in ("initial",):
            yield f"unknown:{_label(path)}", _set(doc, (*path, "bogus_key"), 1) if path else {**doc, "bogus_key": 1}
    text = yaml.safe_dump(doc, sort_keys=False)
    yield "yaml:tab", "\t" + text
    yield "yaml:unclosed", text + "extra: [1, 2\n"
    yield "yaml:list-top", "- 1\n- 2\n"
    yield "yaml:scalar-top", "just text\n"
    yield "yaml:empty", ""
    yield "yaml:int-key", text + "7: seven\n"
    yield "yaml:complex-key", text + "? [a, b]\n: c\n"
    yield "yaml:alias-loop", text + "metadata_loop: &m {self: *m}\n"
    yield "yaml:alias-bomb", text + "bomb:\n" + "".join(
        f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10 if i else ["x"] * 10) + "]\n" for i in range(8))
    yield "yaml:deep-flow", text + "deep: " + "[" * 3000 + "]" * 3000 + "\n"
    yield "yaml:binary", "policy: \x00\x01\n"


def _dump(doc: Any) -> str:
    return doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def corpus() -> list[tuple[str, str, Any]]:
    """(case id, which file is broken, its content)."""
    cases: list[tuple[str, str, Any]] = [(f"spec/{label}", "spec.yaml", doc) for label, doc in mutations(SPEC)]
    cases += [(f"pack/{label}", "pack/pack.yaml", doc) for label, doc in mutations(PACK)]
    cases += [(f"inline/{label}", "spec.yaml", doc) for label, doc in mutations(INLINE)
              if not label.startswith(("yaml:", "unknown:top"))]
    cases += [(f"callable/{label}", "spec.yaml", doc) for label, doc in mutations(CALLABLE)
              if "policy" in label]
    huge = "a" * (6 * 1024 * 1024)
    cases += [("spec/huge-scalar", "spec.yaml", {**SPEC, "name": huge}),
              ("pack/huge-scalar", "pack/pack.yaml", {**PACK, "description": huge})]
    return [case for case in cases if case[0] not in VALID]


CORPUS = corpus()


def test_the_corpus_is_large_and_its_bases_are_valid(tmp_path):
    assert len(CORPUS) >= 300, len(CORPUS)
    assert len({case_id for case_id, _, _ in CORPUS}) == len(CORPUS)
    _layout(tmp_path)
    code, out, err = _run_cli(tmp_path, "spec.yaml")
    assert code == 0 and "Traceback" not in out + err, err
    for base in (INLINE, CALLABLE):
        (tmp_path / "spec.yaml").write_text(_dump(base))
        code, _, err = _run_cli(tmp_path, "spec.yaml", "--trials", "1")
        assert "error: spec.yaml" not in err  # loads; the llm one then errors without a server, fine


def _layout(root: Path, broken: str | None = None, content: Any = None) -> None:
    (root / "pack").mkdir(exist_ok=True)
    (root / "pack" / "oracle.py").write_text(KV_ORACLE)
    (root / "oracle.py").write_text(KV_ORACLE)
    (root / "agent.py").write_text("def act(state):\n    return {'answer': 'done'}\n")
    (root / "pack" / "pack.yaml").write_text(_dump(PACK))
    (root / "spec.yaml").write_text(_dump(SPEC))
    if broken is not None:
        (root / broken).write_text(_dump(content), encoding="utf-8")


@pytest.fixture(scope="module")
def loaded_host() -> Iterator[None]:
    plugin_module.reset_plugins()
    plugin_module.get_host()
    yield
    plugin_module.reset_plugins()


def _run_cli(cwd: Path, *args: str) -> tuple[int, str, str]:
    """``agentsynth run ...`` in-process: click's CliRunner isolation around the real entry point."""
    import os

    runner = CliRunner()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        with runner.isolation() as (out, err, _):
            try:
                code = main(["run", *args, "--no-store", "-q"])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            return int(code or 0), out.getvalue().decode(), err.getvalue().decode()
    finally:
        os.chdir(old)


@pytest.mark.parametrize(("case_id", "broken", "content"), CORPUS, ids=[c[0] for c in CORPUS])
def test_malformed_input_is_a_clear_error(loaded_host, tmp_path, monkeypatch, case_id, broken, content):
    monkeypatch.delenv("AGS_FUZZ_UNSET", raising=False)
    _layout(tmp_path, broken, content)
    started = time.monotonic()
    code, out, err = _run_cli(tmp_path, "spec.yaml")
    elapsed = time.monotonic() - started
    assert code != 0, f"{case_id}: exit 0\n{out}\n{err}"
    assert "Traceback" not in out + err and "internal error" not in err, f"{case_id}:\n{err}"
    assert f"error: {broken}: " in err, f"{case_id}: the message does not name {broken}:\n{err}"
    assert elapsed < 15, f"{case_id}: took {elapsed:.1f} s"  # generous: hangs take minutes


SUBPROCESS_CASES = ["spec/value:timeout=nan", "spec/yaml:deep-flow", "pack/yaml:int-key",
                    "inline/value:policy.max_turns=0", "spec/huge-scalar", "callable/value:policy.function='missing.py:act'"]


@pytest.mark.parametrize("case_id", SUBPROCESS_CASES)
def test_malformed_input_through_the_real_command(tmp_path, case_id):
    (_, broken, content), = [c for c in CORPUS if c[0] == case_id]
    _layout(tmp_path, broken, content)
    proc = run_agentsynth("run", "spec.yaml", "--no-store", "-q", cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"error: {broken}: "), proc.stderr
