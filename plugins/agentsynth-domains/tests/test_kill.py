"""kill -9 mid-run, then resume: nothing accepted is lost or duplicated, finished items and finished
rounds are not requested again (a real `agentsynth run` subprocess against the scripted server)."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

from agentsynth_kernel.testing import reply
from conftest import Roles, read_jsonl, spec_text


def events(run_dir):
    if not (run_dir / "run.sqlite").exists():
        return []
    db = sqlite3.connect(run_dir / "run.sqlite", timeout=10)
    try:
        return [(kind, json.loads(data)) for kind, data in db.execute("SELECT kind, data FROM events ORDER BY id")]
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


def test_kill_minus_nine_then_resume(server, tmp_path):
    def challenger(prompt, n):
        topic = prompt.split("about ", 1)[1].split(" (variant", 1)[0]
        hard = "Feedback on your previous attempt" in prompt
        text = f"{'Hard' if hard else 'Easy'} problem about {topic}: what is seven divided by three, as a fraction?"
        return reply(json.dumps({"problem": text, "answer": "7/3"}), delay=0.12)

    def weak(prompt, n):
        return reply("answer: 7/3" if "Easy problem" in prompt else "answer: 2", delay=0.12)

    roles = Roles(challenger=challenger, weak=weak, strong=lambda p, n: reply("answer: 2 1/3", delay=0.12),
                  auditor=lambda p, n: reply(json.dumps({"pass": True}), delay=0.12))
    server.handler = roles
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text(server, {"type": "math", "count": 5}, concurrency=1, reflector=None), encoding="utf-8")
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "agentsynth_kernel", "run", str(spec), "--run-dir", str(run_dir), "-q"]
    env = {**os.environ, "AGENTSYNTH_LLM_CACHE": "off"}
    child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline:
        done = [d for k, d in events(run_dir) if k == "autosynth_item"]
        if len(done) >= 2 or child.poll() is not None:
            break
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL, child.stderr.read().decode()
    at_kill = events(run_dir)
    finished = {d["item"] for k, d in at_kill if k == "autosynth_item"}
    rounds_done = {(d["item"], d["round"]["round"]) for k, d in at_kill if k == "autosynth_round"}
    assert 2 <= len(finished) < 5
    mark = len(roles.log)

    result = subprocess.run([*cmd, "--json", str(tmp_path / "report.json")], env=env, capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["accepted"] == 5 and report["restored_items"] == len(finished)
    records = read_jsonl(report["output"])
    items = [r["metadata"]["item"] for r in records]
    assert sorted(items) == [f"math-{i:04d}" for i in range(5)]  # none lost, none twice
    assert all(r["metadata"]["round"] == 2 for r in records)
    after = roles.log[mark:]
    topics = {f"math-{i:04d}": t for i, t in enumerate(
        ["splitting a bill", "mixing two solutions", "two workers filling", "a recipe scaled", "a discount followed"])}
    for item, topic in topics.items():
        asked = [e for e in after if e["who"] == "challenger" and topic in e["user"]]
        if item in finished:
            assert asked == [], f"{item} was finished before the kill but was requested again"
        elif (item, 1) in rounds_done:  # its first round was stored: the resume starts at round 2
            assert all("Feedback on your previous attempt" in e["user"] for e in asked)
