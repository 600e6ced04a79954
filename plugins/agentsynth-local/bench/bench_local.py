"""agentsynth-local measurements, written as JSON with the machine's load (``os.getloadavg()``).

Sections (``--sections``, default all):

- ``install``: a fresh venv, ``pip install`` of the kernel, agentsynth-sql and agentsynth-local
  (the llama-cpp-python wheel found in ``$PIP_FIND_LINKS``, everything else from PyPI or its cache),
  then the first real-model episode (``agentsynth bench --pack core --only ... --policy
  'llm,model=local'``): seconds for each, and the total a new user waits.
- ``core``: ``agentsynth bench`` on core (``--only`` a subset, default all 22) with the embedded
  model, with and without the small-model mode: episodes/min, pass rate, errors, tool calls.
- ``judge``: ``agentsynth judge score`` of the small-model run with ``judge: {type: llm, model:
  local}``: how many trajectories got a score, the mean, seconds per trajectory.
- ``interrupt``: N long requests sent to a server, then the clients hang up: seconds until the
  server is idle, against the baseline of the same requests answered to the end (same run).
- ``threads``: one answer on 1 thread (the default here) against llama-cpp-python's default
  threads (half the cores to decode, all of them for the prompt), same prompt, same run.

Usage: python plugins/agentsynth-local/bench/bench_local.py [--sections core judge] [--only TASK ...]
       [--out plugins/agentsynth-local/bench/results/local.json]
Needs agentsynth-sql and agentsynth-judge installed next to this plugin (the real-llm nox venv has them).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AGENTSYNTH_LLM_CACHE": "off",
       "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
FIRST_TASK = "lookup-customer-email"


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run(argv: list[str], cwd: Path, timeout: float = 7200, env: dict[str, str] | None = None,
        ) -> tuple[subprocess.CompletedProcess[str], float]:
    began = time.monotonic()
    res = subprocess.run(argv, cwd=cwd, env=env or ENV, capture_output=True, text=True, timeout=timeout)
    return res, time.monotonic() - began


def agentsynth(python: str, *args: str, cwd: Path, timeout: float = 7200) -> tuple[subprocess.CompletedProcess[str], float]:
    return run([python, "-m", "agentsynth_kernel", *args], cwd, timeout)


def section_install(work: Path) -> dict[str, Any]:
    """Fresh venv -> pip install -> first real-model episode."""
    work.mkdir(parents=True, exist_ok=True)
    venv = work / "venv"
    out: dict[str, Any] = {"load_before": load()}
    res, out["venv_s"] = run([sys.executable, "-m", "venv", str(venv)], work)
    if res.returncode:
        return {**out, "error": res.stderr[-2000:]}
    py = str(venv / "bin" / "python")
    res, out["pip_install_s"] = run([py, "-m", "pip", "install", "-q", "-e", str(ROOT), "-e",
                                     str(ROOT / "plugins" / "agentsynth-sql"), "-e",
                                     str(ROOT / "plugins" / "agentsynth-local")], work, timeout=3600)
    if res.returncode:
        return {**out, "error": res.stderr[-2000:]}
    res, out["first_episode_s"] = agentsynth(py, "bench", "--pack", "core", "--only", FIRST_TASK, "--policy",
                                             "llm,model=local", "--json", "first.json", "-q", cwd=work)
    if res.returncode:
        return {**out, "error": res.stderr[-2000:]}
    report = json.loads((work / "first.json").read_text())
    out["first_episode_status"] = report["counts"]
    out["install_to_first_episode_s"] = round(out["venv_s"] + out["pip_install_s"] + out["first_episode_s"], 1)
    out["find_links"] = os.environ.get("PIP_FIND_LINKS", "")
    out["load_after"] = load()
    return out


def _episodes(run_dir: Path) -> list[Any]:
    from agentsynth_kernel import RunStore

    return list(RunStore(run_dir).results())


def section_core(work: Path, only: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode, policy in (("small_model", "llm,model=local"), ("plain", "llm,model=local,small_model=false")):
        run_dir = work / f"core-{mode}"
        before = load()
        res, seconds = agentsynth(sys.executable, "bench", "--pack", "core", *[a for t in only for a in ("--only", t)],
                                  "--policy", policy, "--concurrency", "1", "--run-dir", str(run_dir),
                                  "--json", str(work / f"core-{mode}.json"), "-q", cwd=work)
        if res.returncode:
            out[mode] = {"error": res.stderr[-2000:]}
            continue
        report = json.loads((work / f"core-{mode}.json").read_text())
        results = _episodes(run_dir)
        calls = [s for r in results if r.trajectory for s in r.trajectory.steps if hasattr(s.action, "arguments")]
        episodes = report["episodes"]
        out[mode] = {
            "policy": policy, "episodes": episodes, "counts": report["counts"],
            "pass_rate": round(report["counts"].get("passed", 0) / episodes, 3) if episodes else None,
            "wall_s": round(seconds, 1), "episodes_per_min": round(60 * episodes / seconds, 2),
            "tool_calls": len(calls), "invalid_calls": sum(1 for s in calls if s.invalid),
            "completion_tokens": sum(r.usage.completion_tokens for r in results),
            "load_before": before, "load_after": load(),
        }
    return out


def section_judge(work: Path) -> dict[str, Any]:
    run_dir = work / "core-small_model"
    if not run_dir.exists():
        return {"error": "needs the core section's run"}
    (work / "judge.yaml").write_text("judge: {type: llm, model: local}\n")
    before = load()
    res, seconds = agentsynth(sys.executable, "judge", "score", str(run_dir), "-o", str(work / "scores.jsonl"),
                              "--judge-spec", str(work / "judge.yaml"), cwd=work)
    rows = [json.loads(line) for line in (work / "scores.jsonl").read_text().splitlines()] if (
        work / "scores.jsonl").exists() else []
    scored = [r for r in rows if r.get("score") is not None]
    return {"exit_code": res.returncode, "trajectories": len(rows), "scored": len(scored),
            "errors": sorted({r["error"][:160] for r in rows if r.get("error")}),
            "mean_score": round(sum(r["score"] for r in scored) / len(scored), 3) if scored else None,
            "scores": [r["score"] for r in scored], "judge_passed": sum(1 for r in scored if r.get("passed")),
            "wall_s": round(seconds, 1), "s_per_trajectory": round(seconds / max(1, len(rows)), 1),
            "summary": res.stdout.strip()[-300:], "load_before": before, "load_after": load()}


def _start_server(threads: int | None = None) -> tuple[subprocess.Popen[str], str]:
    from agentsynth_local.models import find_gguf

    argv = [sys.executable, "-m", "agentsynth_local.server", "--model", str(find_gguf("smollm2")), "--port", "0"]
    if threads:
        argv += ["--threads", str(threads)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    return proc, f"http://127.0.0.1:{line[1]}"


def _health(base: str) -> dict[str, Any]:
    with urllib.request.urlopen(base + "/health", timeout=60) as response:
        return json.loads(response.read())


def _post(base: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(base + "/v1/chat/completions", json.dumps(body).encode(),
                                     {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=3600) as response:
        return json.loads(response.read())


REQUEST = {"messages": [{"role": "user", "content": "Write a very long story about a dragon and a shop."}],
           "max_tokens": 200}


def section_interrupt(n: int = 3) -> dict[str, Any]:
    proc, base = _start_server()
    try:
        before = load()
        # baseline: the same n requests answered to the end (one after the other, as the server does)
        began = time.monotonic()
        threads = [threading.Thread(target=_post, args=(base, REQUEST)) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        baseline = time.monotonic() - began
        # the same n requests, the clients hang up once the first is being decoded
        port = int(base.rsplit(":", 1)[1])
        data = json.dumps(REQUEST).encode()
        socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                      b"content-length: %d\r\n\r\n%s" % (len(data), data))
            socks.append(s)
        while (h := _health(base))["busy"] + h["waiting"] < n:
            time.sleep(0.02)
        for s in socks:
            s.close()
        began = time.monotonic()
        while (h := _health(base))["busy"] or h["waiting"]:
            time.sleep(0.02)
        idle = time.monotonic() - began
        return {"requests": n, "max_tokens": REQUEST["max_tokens"], "answered_to_the_end_s": round(baseline, 2),
                "idle_after_hangup_s": round(idle, 2), "health": h, "load_before": before, "load_after": load()}
    finally:
        proc.terminate()
        proc.wait(30)


def section_threads() -> dict[str, Any]:
    """One forced tool call with a ~300-token prompt, cold prompt cache, by thread setting."""
    from agentsynth_local import server as srv
    from agentsynth_local.models import find_gguf

    tool = {"type": "function", "function": {"name": "sql_query", "description": "Run SQL", "parameters": {
        "type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}}}
    out: dict[str, Any] = {"cpu_count": os.cpu_count(), "default_threads_now": srv.default_threads()}
    for label, threads in (("ours", None), ("llama_cpp_default", "library")):
        if threads == "library":
            from llama_cpp import Llama

            engine = srv.LlamaCppEngine.__new__(srv.LlamaCppEngine)
            engine.llm = Llama(model_path=str(find_gguf("smollm2")), n_ctx=2048, verbose=False)
            engine.n_ctx, engine.lock, engine.grammars, engine.stats = 2048, threading.Lock(), {}, srv.Stats()
            engine.threads = engine.llm.n_threads
            model = srv.Model.__new__(srv.Model)
            model.name, model.path, model.engine_name, model.engine, model.n_ctx = "x", "", "llama_cpp", engine, 2048
        else:
            model = srv.Model(str(find_gguf("smollm2")), 2048, None, "x")
        times = []
        for i in range(2):
            body = {"messages": [{"role": "user", "content": f"Request {i}: " + "customers orders products " * 60
                                  + "Write a SQL query."}], "max_tokens": 40, "tools": [tool], "tool_choice": "required"}
            began = time.monotonic()
            model.chat(body)
            times.append(round(time.monotonic() - began, 2))
        out[label] = {"n_threads": model.engine.llm.n_threads, "n_threads_batch": model.engine.llm.n_threads_batch,
                      "answer_s": times, "load": load()}
        del model
    return out


def save(path: Path, sections: dict[str, Any]) -> None:
    """Merge sections into the JSON file (sections measured by other invocations are kept)."""
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(sections)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", nargs="+", default=["install", "core", "judge", "interrupt", "threads"])
    parser.add_argument("--only", nargs="*", default=[], help="core tasks to run (default: all 22)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("AGENTSYNTH_BENCH_OUT", HERE / "results"))
                        / "local.json")
    parser.add_argument("--work", type=Path, default=None, help="keep the runs here (default: a temp dir)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-local-"))
    work.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                                          "python": platform.python_version(), "load_start": load()}}
    for name in args.sections:
        began = time.monotonic()
        if name == "install":
            value = section_install(work / "install")
        elif name == "core":
            value = section_core(work, args.only)
        elif name == "judge":
            value = section_judge(work)
        elif name == "interrupt":
            value = section_interrupt()
        elif name == "threads":
            value = section_threads()
        else:
            parser.error(f"unknown section {name!r}")
        value["section_s"] = round(time.monotonic() - began, 1)
        value["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        result[name] = value
        save(args.out, {name: value})  # after every section: nothing done is lost
        print(f"{name}: {json.dumps(value)[:600]}", flush=True)
    save(args.out, {"machine": result["machine"], "load_end": load()})
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
