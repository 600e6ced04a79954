"""The exported packages, installed in fresh venvs (only verifiers or openenv-core, agentsynth, the
pack's plugin and agentsynth-rl, from this checkout) and driven by the real libraries:

- verifiers: ``vf-eval`` evaluates the exported environment against the kernel's ScriptedLLMServer
  (a real OpenAI-compatible HTTP server); the rewards verifiers records equal the kernel's verdicts
  of the same tool calls replayed in fresh worlds, with the same observations.
- OpenEnv: the exported package's own ``server`` script serves the pack (exported from a path, so
  the package carries it); OpenEnv's client (and the package's typed client) play episodes whose
  rewards equal the kernel's gym verdicts.

Minutes of installs and subprocesses (uv resolves verifiers and openenv-core from the package index):
marked ``export`` and run by ``nox -s rl-train`` (which has the core pack's agentsynth-sql).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.export

ROOT = Path(__file__).resolve().parents[3]
DRIVERS = Path(__file__).resolve().parent / "export_drivers"
LOCAL = ["-e", str(ROOT), "-e", str(ROOT / "plugins" / "agentsynth-sql"), "-e", str(ROOT / "plugins" / "agentsynth-rl")]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    return env


def fresh_venv(where: Path, *install: str) -> Path:
    """A new venv holding exactly ``install`` (and what it depends on); returns its python."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is needed to build the fresh venvs")
    subprocess.run([uv, "venv", "-q", "-p", f"{sys.version_info.major}.{sys.version_info.minor}", str(where)],
                   check=True, env=_env(), timeout=300)
    python = where / "bin" / "python"
    proc = subprocess.run([uv, "pip", "install", "-q", "--python", str(python), *install], env=_env(),
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return python


def run(python: Path, *args: str, timeout: float = 900, cwd: Path | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(python), *args], env=_env(), capture_output=True, text=True, timeout=timeout, cwd=cwd)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc


def openai_completion(nodes: list[dict]) -> list[dict]:
    """verifiers' recorded messages after the prompt, as OpenAI chat messages (what the model said
    and the tool results it saw) for the kernel's replay."""
    out = []
    for node in nodes:
        message = node.get("message", node)
        if message["role"] == "assistant":
            calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                     for c in message.get("tool_calls") or []]
            out.append({"role": "assistant", "content": message.get("content"), **({"tool_calls": calls} if calls else {})})
        elif message["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": message.get("tool_call_id"), "content": message["content"]})
    return out


def test_verifiers_export_evaluates_to_the_kernels_verdicts(core, host, tmp_path_factory):
    from agentsynth_rl import PackEnv, VerdictReward
    from agentsynth_rl.export import export_pack

    work = tmp_path_factory.mktemp("vf")
    started = time.perf_counter()
    done = export_pack("core", "verifiers", work / "export", host=host)
    python = fresh_venv(work / "venv", *LOCAL, str(work / "export"))
    installed = time.perf_counter()

    # the package loads through verifiers' own loader; train by default, test only when asked
    listing = run(python, "-c", (
        "import json, agentsynth_env_core as m, verifiers.v1 as vf\n"
        "env = m.load_environment()\n"
        "test = m.load_environment(split='test')\n"
        "print(json.dumps({'env': type(env).__name__, 'harness': type(env._harnesses['agent']).__name__,"
        " 'train': [t.data.split for t in env.taskset], 'test': [t.data.split for t in test.taskset],"
        " 'ids': [t.data.task_id for t in env.taskset]}))"))
    seen = json.loads(listing.stdout.strip().splitlines()[-1])
    assert (seen["env"], seen["harness"]) == ("CoreEnv", "CoreHarness")
    train = [t for t in core.tasks if t.split == "train"]
    assert seen["train"] == ["train"] * len(train) and seen["ids"] == [t.id for t in train]
    assert seen["test"] == ["test"] * (len(core.tasks) - len(train))

    # the loopback endpoint holding the worlds refuses what is not the rollout's own tool server
    probe = json.loads(run(python, str(DRIVERS / "sessions_probe.py")).stdout.strip().splitlines()[-1])
    assert probe["url"].startswith("http://127.0.0.1:")
    assert (probe["no_token"], probe["wrong_token"], probe["unknown_session"], probe["bad_body"]) == (401, 401, 404, 400)
    assert probe["unknown_tool"]["error"] is True and "unknown tool 'os_system'" in probe["unknown_tool"]["content"]
    assert probe["tools"] == ["sql_query", "sql_execute"] and probe["call"] == {"content": "ok: 1 row(s) affected",
                                                                                "error": False}
    assert "is in the 'test' split" in probe["test_task_as_train"]
    assert probe["finish"] == {"split": "train", "status": "passed", "scored": True, "reward": 1.0}
    assert probe["other_world"] == {"status": "failed", "reward": 0.0}  # worlds are not shared
    assert "already scored" in probe["finish_again"]
    # a multi-turn task (the support pack's scripted customer): the talk goes through message_user
    talk = json.loads(run(python, str(DRIVERS / "sessions_talk.py")).stdout.strip().splitlines()[-1])
    assert talk["tools"] == ["sql_query", "sql_execute", "message_user"]
    assert talk["replies"][0] == "My email is sam@example.com." and talk["replies"][2] == "The new address is 12 Elm St."
    assert talk["oracle"] == {"status": "passed", "reward": 1.0, "scored": True, "error_kind": ""}
    assert talk["shortcut"] == {"status": "failed", "reward": 0.0, "scored": True}

    names = ["update-email", "mark-shipped", "lookup-customer-email", "deactivate-customer"]
    proc = run(python, str(DRIVERS / "vf_eval.py"), done.distribution, str(work / "runs"), "--names", ",".join(names))
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["returncode"] == 0 and summary["requests"] >= 2 * len(names), (summary, proc.stderr[-4000:])
    episodes = [json.loads(line) for t in summary["traces"] for line in Path(t).read_text().splitlines()]
    assert sorted(e["traces"][0]["task"]["data"]["task_id"] for e in episodes) == sorted(names)
    finished = time.perf_counter()

    # the kernel re-checks what verifiers recorded: the same tool calls in a fresh world of the same seed
    rewards, completions, task_ids, seeds = [], [], [], []
    for episode in episodes:
        trace = episode["traces"][0]
        data = trace["task"]["data"]
        assert data["split"] == "train" and trace["info"]["agentsynth"]["split"] == "train"  # every record says its split
        assert trace["info"]["agentsynth"]["provenance"]["pack_hash"] == core.content_hash
        rewards.append(trace["rewards"]["verdict"]["score"])
        completions.append(openai_completion(trace["nodes"]))
        task_ids.append(data["task_id"])
        seeds.append(data["seed"])
    kernel = VerdictReward(core, host=host)
    verdicts = kernel(prompts=[[]] * len(task_ids), completions=completions, task_id=task_ids, seed=seeds)
    assert rewards == verdicts
    # and the model saw what a kernel world shows for the same calls (drift also counts the error
    # flag, which OpenAI tool messages do not carry: compare the text through the gym API)
    gym = PackEnv(core, host=host)
    for task_id, seed, completion, reward in zip(task_ids, seeds, completions, rewards, strict=True):
        gym.reset(seed=seed, options={"task_id": task_id})
        for message in completion:
            if message["role"] == "tool":
                continue
            if message.get("tool_calls"):
                observation, *_ = gym.step(message)
                assert observation == "\n\n".join(
                    m["content"] for m in completion if m["role"] == "tool"
                    and m["tool_call_id"] in {c["id"] for c in message["tool_calls"]}), task_id
            else:
                _, live, terminated, _, _ = gym.step(message["content"] or "")
                assert terminated and live == reward, task_id
    gym.close()
    by_task = dict(zip(task_ids, rewards, strict=True))
    assert by_task["update-email"] == 1.0 and by_task["mark-shipped"] == 0.0  # both outcomes occur
    print(f"\nverifiers export: install {installed - started:.1f}s, eval of {len(names)} rollouts "
          f"{finished - installed:.1f}s, rewards {by_task}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_openenv_export_serves_the_pack_to_openenvs_client(core, host, tmp_path_factory):
    pytest.importorskip("openenv.core")
    from openenv.cli._validation import validate_running_environment
    from openenv.core import GenericEnvClient

    from agentsynth_rl import PackEnv
    from agentsynth_rl.export import export_pack

    work = tmp_path_factory.mktemp("oe")
    started = time.perf_counter()
    # the pack from a path this time (the verifiers test names the registered one): it travels in the package
    shutil.copytree(core.base_dir, work / "shop", ignore=shutil.ignore_patterns("__pycache__"))
    done = export_pack(work / "shop", "openenv", work / "export", host=host)
    assert "agentsynth-sql>=" in " ".join(done.requires) and (work / "export" / "pack" / "pack.yaml").is_file()
    shutil.rmtree(work / "shop")  # the installed package must not need the original
    python = fresh_venv(work / "venv", *LOCAL, str(work / "export"))
    installed = time.perf_counter()
    port = _free_port()
    server = subprocess.Popen([str(python.parent / "server"), "--host", "127.0.0.1", "--port", str(port)],
                              env=_env(), cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the exported server did not start: {server.stdout.read() if server.stdout else ''}")  from None
                time.sleep(0.2)
        report = validate_running_environment(url)
        failed = [c for c in report["criteria"] if not c.get("passed")]
        assert report["passed"], failed

        episodes = {
            "update-email": [{"tool": "sql_execute", "arguments": {
                "sql": "UPDATE customers SET email = 'maya@chen.example.org' WHERE id = 6"}}],
            "mark-shipped": [{"tool": "sql_execute", "arguments": {
                "sql": "UPDATE orders SET status = 'cancelled' WHERE id = 1005"}}],
        }
        gym = PackEnv(core, host=host)
        for task_id, actions in episodes.items():
            with GenericEnvClient(base_url=url).sync() as env:
                first = env.reset(task_id=task_id, seed=11)
                assert first.observation["split"] == "train"
                seen = [env.step(a).observation["content"] for a in actions]
                end = env.step({"answer": "done"})
            gym.reset(seed=11, options={"task_id": task_id})
            expected = [gym.step(a)[0] for a in actions]
            _, reward, terminated, _, info = gym.step("done")
            assert terminated and end.done
            assert (seen, end.reward) == (expected, reward)  # same world, same verdict
            assert end.observation["status"] == info["status"]
            assert end.observation["provenance"]["pack_hash"] == core.content_hash
        gym.close()
        with GenericEnvClient(base_url=url).sync() as env, pytest.raises(Exception, match="'test' split"):
            env.reset(task_id="count-pending-orders")  # held out: not served unless asked

        # the package's own typed client, from its venv
        typed = run(python, "-c", (
            "from agentsynth_openenv_core import CoreAction, CoreEnv\n"
            f"with CoreEnv(base_url='{url}').sync() as env:\n"
            "    env.reset(task_id='update-email', seed=3)\n"
            "    env.step(CoreAction(tool='sql_execute', arguments={'sql': "
            "\"UPDATE customers SET email = 'maya@chen.example.org' WHERE id = 6\"}))\n"
            "    end = env.step(CoreAction(answer='done'))\n"
            "    print(end.reward, end.observation.status, end.observation.split)"))
        assert typed.stdout.split()[-3:] == ["1.0", "passed", "train"]
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"\nopenenv export {done.distribution}: install {installed - started:.1f}s, "
          f"serve + episodes {time.perf_counter() - installed:.1f}s")
