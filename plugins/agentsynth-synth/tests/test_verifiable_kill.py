"""``acceptance: verifiable`` killed with SIGKILL mid-item: the rerun finishes every item once and
requests no proposal or attempt that the killed run had stored."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from agentsynth_kernel import RunStore
from agentsynth_synth import run_generator
from conftest import first_user, policy, reply, turn

LETTERS = "abcdefgh"
EPISODE = re.compile(r"\(episode (\d+)\)")


def challenger(request):
    k = int(re.search(r"Write task #(\d+)", first_user(request)).group(1))
    key = f"shape_{LETTERS[k - 1]}"
    return reply(json.dumps({"instruction": f"Set the note '{key}' to 'circle'.",
                             "checkers": [{"type": "note_equals", "key": key, "value": "circle"}]}))


def events(run_dir: Path) -> list[tuple[str, dict]]:
    try:
        db = sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True, timeout=5)
        try:
            return [(kind, json.loads(data)) for kind, data in
                    db.execute("SELECT kind, data FROM events WHERE kind IN ('synth_step', 'synth_item') ORDER BY id")]
        finally:
            db.close()
    except sqlite3.Error:
        return []


def partial_items(evs: list[tuple[str, dict]]) -> set[str]:
    """Items with a stored solver attempt but no finished record."""
    done = {d["item"] for kind, d in evs if kind == "synth_item"}
    return {d["item"] for kind, d in evs if kind == "synth_step" and ":weak:" in d["key"]} - done


def test_sigkill_mid_item_then_resume(llm, pack_dir, tmp_path):
    (pack_dir / "pack.yaml").write_text((pack_dir / "pack.yaml").read_text().replace(
        "environment: {type: notes}", "environment: {type: notes, show_seed: true}"))
    llm.router.routes.update(challenger=challenger, weak=lambda r: reply("done"))
    llm.latency = 0.25  # weak attempts land together; the strong ones (short-circuit: after them) take 0.5 s more
    n = 4
    p = {"model": "openai/challenger", "api_base": llm.base_url, "strong": [policy(llm, "good")],
         "weak": [policy(llm, "weak")], "acceptance": "verifiable", "short_circuit_strong": True, "rounds": 1,
         "n": n}
    run_dir = tmp_path / "run"
    child = subprocess.Popen([sys.executable, str(Path(__file__).parent / "synth_child.py"), str(pack_dir),
                              str(run_dir), json.dumps(p), "challenger"],
                             env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not partial_items(events(run_dir)) and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    before = events(run_dir)
    partial = partial_items(before)
    assert partial, f"the kill came too late ({child.returncode}): {child.stderr.read().decode()[-2000:]}"
    done = {d["item"] for kind, d in before if kind == "synth_item"}
    stored = [d for kind, d in before if kind == "synth_step" and d["item"] not in done]
    stored_attempts = {(d["key"].split(":")[1], EPISODE.search(d["value"]["trajectory"]["initial_observation"]).group(1))
                       for d in stored if d["key"].split(":")[1] in ("weak", "strong")}
    stored_proposals = {int(d["item"].split("-")[1]) + 1 for d in stored if d["key"] == "r0:proposal"}
    assert stored_attempts and stored_proposals

    llm.clear()
    llm.latency = 0.0
    report = run_generator("challenger", pack_dir, p, run_dir=run_dir, cache=False)
    # nothing stored was requested again: not a proposal, not an attempt (same side, same world seed)
    again = {int(re.search(r"Write task #(\d+)", first_user(r.json)).group(1))
             for r in llm.requests if r.json["model"] == "challenger" and turn(r.json) == 0}
    assert not again & stored_proposals
    side = {"weak": "weak", "good": "strong"}
    asked = {(side[r.json["model"]], EPISODE.search(first_user(r.json)).group(1))
             for r in llm.requests if r.json["model"] in side and turn(r.json) == 0}
    assert asked and not asked & stored_attempts
    assert report.restored_steps == len(stored)
    assert report.restored_items == len(done) and report.done_items == n - len(done)
    # no item lost or duplicated, and each record's cost includes the steps the killed run paid for
    assert sorted(r.task_id for r in report.accepted) == [f"ch-{i:04d}" for i in range(n)]
    assert all(r.trajectory.metadata["synth"]["item_requests"] == 13 for r in report.accepted)
    store = RunStore(run_dir, create=False)
    try:
        items = [d["item"] for _, kind, d in store.events() if kind == "synth_item"]
        results = list(store.results())
    finally:
        store.close()
    assert sorted(items) == [f"ch-{i:04d}" for i in range(n)]
    assert sorted(r.task_id for r in results) == [f"ch-{i:04d}" for i in range(n)]
