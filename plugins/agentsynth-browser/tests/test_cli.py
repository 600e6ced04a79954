"""The webshop pack through the real CLI and real headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import yaml


def run_json(cli, tmp_path: Path, spec: dict, name: str = "spec.yaml", codes: tuple[int, ...] = (0,)) -> dict:
    (tmp_path / name).write_text(yaml.safe_dump(spec))
    proc = cli("run", name, "--no-store", "--json", "-", cwd=tmp_path)
    assert proc.returncode in codes, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_oracle_solves_every_task_and_leaves_no_process(cli, procs, tmp_path):
    assert procs.tagged() == [] or procs.wait_gone() == []
    report = run_json(cli, tmp_path, {"pack": "webshop", "policy": {"type": "oracle"}, "concurrency": 4})
    assert report["episodes"] == 12
    failed = [(r["task_id"], r["error"], [v["detail"] for v in r["verdicts"] if not v["passed"]])
              for r in report["results"] if r["status"] != "passed"]
    assert failed == []
    assert report["pass_rate"]["rate"] == 1.0
    # every checker kind ran at least once
    kinds = {v["checker"] for r in report["results"] for v in r["verdicts"]}
    assert {"app_db", "page", "url", "answer_contains"} <= kinds
    assert procs.wait_gone() == [], "Chromium or the Playwright driver outlived the run"


def test_noop_and_claim_success_score_zero(cli, procs, tmp_path):
    """Both floors in one process (``bench --compare``): no task passes without doing the work."""
    proc = cli("bench", "--pack", "webshop", "--compare", "noop", "claim_success", "--json", "report.json", "-q",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    for side in ("a", "b"):
        assert report[side]["episodes"] == 12
        assert report[side]["counts"] == {"passed": 0, "failed": 12, "error": 0}, report[side]["results"]
    assert procs.wait_gone() == []


HANG_SITE = """<!doctype html><title>Trap</title><h1>Trap</h1>
<button id="hang" onclick="while (true) {}">Freeze</button><a id="next" href="/next.html">Next</a>"""


def test_a_hung_page_fails_only_its_episode(cli, procs, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(HANG_SITE)
    (site / "next.html").write_text("<title>Next</title><p id='done'>You made it</p>")
    (tmp_path / "oracle.py").write_text(
        "ORACLE = {\n"
        " 'freeze': [{'tool': 'click', 'arguments': {'element': '#hang'}},\n"
        "            {'tool': 'read', 'arguments': {}}, {'answer': 'done'}],\n"
        " 'walk': [{'tool': 'click', 'arguments': {'element': '#next'}}, {'answer': 'done'}],\n"
        "}\n"
    )
    spec = {
        "name": "trap",
        "environment": {"type": "browser", "static": "site", "action_timeout": 1, "navigation_timeout": 1},
        "oracle": "oracle.py",
        "policy": {"type": "oracle"},
        "tasks": [
            {"id": "freeze", "instruction": "Press the button.",
             "checkers": [{"type": "page", "selector": "h1", "text": "Trap"}]},
            {"id": "walk", "instruction": "Go to the next page.",
             "checkers": [{"type": "page", "selector": "#done", "text": "made it"}, {"type": "url", "path": "/next.html"}]},
        ],
    }
    report = run_json(cli, tmp_path, spec)
    by_id = {r["task_id"]: r for r in report["results"]}
    assert by_id["walk"]["status"] == "passed"
    assert by_id["freeze"]["status"] == "error"
    assert by_id["freeze"]["error_kind"] == "environment"
    assert "stopped responding" in by_id["freeze"]["error"]
    assert by_id["freeze"]["duration_s"] < 15
    assert procs.wait_gone() == []


def test_bad_environment_parameter_is_a_path_qualified_error(cli, tmp_path):
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({
        "name": "bad", "policy": "noop",
        "environment": {"type": "browser", "actoin_timeout": 3},
        "tasks": [{"id": "t", "instruction": "x", "checkers": [{"type": "url", "contains": "/"}]}],
    }))
    proc = cli("run", "spec.yaml", "--no-store", cwd=tmp_path)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "environment.actoin_timeout" in out and "action_timeout" in out
    assert "Traceback" not in out


def test_missing_chromium_is_an_environment_error_not_a_crash(cli, procs, tmp_path):
    report = run_json(cli, tmp_path, {
        "name": "nochrome", "policy": "noop",
        "environment": {"type": "browser", "executable_path": str(tmp_path / "no-such-chromium")},
        "tasks": [{"id": "t", "instruction": "x", "checkers": [{"type": "url", "contains": "/"}]}],
    }, codes=(5,))  # 5: every episode ended in an error
    (result,) = report["results"]
    assert result["status"] == "error" and result["error_kind"] == "environment"
    assert "no Chromium executable" in result["error"]


def test_plugin_lists_its_components(cli, tmp_path):
    proc = cli("plugins", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (info,) = [p for p in json.loads(proc.stdout) if p["name"] == "browser"]
    assert info["errors"] == []
    assert info["registered"] == {"environment": ["browser"], "checker": ["page", "url", "app_db"], "pack": ["webshop"]}


def test_killed_cli_leaves_no_browser_behind(procs, tmp_path):
    """SIGKILL gives no chance to clean up: the Playwright driver sees its pipe close and takes
    Chromium down with it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({"pack": "webshop", "policy": "oracle", "trials": 5}))
    cli = str(Path(sys.executable).parent / "agentsynth")
    proc = subprocess.Popen([cli, "run", "spec.yaml", "--no-store", "-q"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        # the driver plus Chromium's browser process at least (how many helpers Chromium starts varies)
        while len(procs.tagged()) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert proc.poll() is None and len(procs.tagged()) >= 2, "the run never started Chromium"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert procs.wait_gone(30) == []


def test_atexit_closes_a_browser_used_outside_a_run(procs, tmp_path):
    import subprocess
    import sys

    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<title>Hi</title><p>hello</p>")
    code = (
        "import asyncio\n"
        "from agentsynth_browser import BrowserEnvironment\n"
        "async def main():\n"
        f"    env = BrowserEnvironment(static={str(site)!r})\n"
        "    obs = await env.reset(0)\n"
        "    assert 'hello' in obs.content, obs.content\n"
        "    await env.close()\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert procs.wait_gone(10) == []
