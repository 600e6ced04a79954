from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentsynth_kernel import (
    Answer,
    EpisodeResult,
    Observation,
    RunStore,
    Step,
    ToolCall,
    ToolSpec,
    Trajectory,
    Usage,
    Verdict,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

TOOLS = [
    ToolSpec("get", "Read a key", {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}),
    ToolSpec("set", "Set a key", {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "string"}}}),
]
PROVENANCE = {"run_id": "r123", "pack": "kv", "pack_hash": "sha256:abc", "policy": {"type": "oracle"},
              "versions": {"agentsynth": "0.1.0"}}


def make_result(task_id: str, trial: int, passed: bool, *, split: str = "train", instruction: str | None = None,
                answer: str = "done", scores: dict[str, float] | None = None) -> EpisodeResult:
    """A realistic episode: two parallel tool calls in turn 0, one call in turn 1, then an answer."""
    steps = [
        Step(ToolCall("get", {"key": "a"}, f"c{trial}a"), Observation("1"), turn=0, thought="read both keys"),
        Step(ToolCall("get", {"key": "b"}, f"c{trial}b"), Observation("2"), turn=0),
        Step(ToolCall("set", {"key": "sum", "value": "3" if passed else "4"}, f"c{trial}c"), Observation("ok"), turn=1),
        Step(Answer(answer if passed else "the sum is 4"), None, turn=2),
    ]
    traj = Trajectory(
        task_id=task_id,
        instruction=instruction or f"Add the values of keys a and b and store the sum under 'sum' ({task_id}).",
        steps=steps, tools=TOOLS, initial_observation="keys: ['a', 'b']", system_prompt="You are a careful agent.",
        metadata={"tier": "easy"},
    )
    return EpisodeResult(
        task_id=task_id, trial=trial, seed=1000 + trial, status="passed" if passed else "failed", trajectory=traj,
        verdicts=[Verdict("kv_equals", passed, 1.0 if passed else 0.0, "sum")],
        duration_s=0.5, usage=Usage(100, 20, 0.001, 2), scores=scores or {}, split=split, tier="easy",
        provenance=PROVENANCE,
    )


def sample_results() -> list[EpisodeResult]:
    return [
        make_result("add-1", 0, True, split="test"),
        make_result("add-1", 1, False, split="test"),
        make_result("add-2", 0, True, scores={"judge": 0.9, "judge.reward": 0.95}),
        make_result("add-2", 1, True, scores={"judge": 0.4, "judge.reward": 0.3}),
        make_result("add-2", 2, False),
        make_result("add-3", 0, False),
        EpisodeResult(task_id="add-4", trial=0, seed=7, status="error", error="environment exploded",
                      error_kind="environment", provenance=PROVENANCE),
    ]


def write_run(run_dir: Path, results: list[EpisodeResult]) -> Path:
    store = RunStore(run_dir)
    store.set_meta("run_id", "r123")
    store.set_meta("pack", {"id": "kv", "source": "pack.yaml", "content_hash": "sha256:abc"})
    for r in results:
        store.put(r)
    store.close()
    return run_dir


@pytest.fixture
def results() -> list[EpisodeResult]:
    return sample_results()


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run", sample_results())


def agentsynth(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real `agentsynth` console script of this environment."""
    exe = Path(sys.executable).parent / "agentsynth"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_DATASETS_OFFLINE": "1",
           "AGENTSYNTH_LOAD_PLUGINS": "export"}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
