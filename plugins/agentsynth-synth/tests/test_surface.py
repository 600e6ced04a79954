"""The plugin's surface: registry entries, the kernel Generator protocol, the CLI, progress, pack writing."""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml

from agentsynth_kernel import (
    AgentsynthError,
    ComponentSpec,
    EpisodeResult,
    RunSpec,
    Trajectory,
    build,
    execute,
    get_host,
    load_pack,
)
from agentsynth_kernel.cli import main
from agentsynth_synth import run_generator
from agentsynth_synth.cli import Progress
from agentsynth_synth.core import SynthReport, write_pack
from conftest import policy


def cli(*args):
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = exc.code
    return code or 0


def test_everything_is_registered():
    host = get_host()
    assert set(host.names("generator")) >= {"forward", "back_translation", "replay_filter", "challenger", "evolve",
                                            "from_failures"}
    assert {"state_probe", "synth_fingerprint"} <= set(host.names("checker"))
    assert "synth_replay" in host.names("policy")


def test_built_generator_follows_the_kernel_protocol(llm, pack_dir):
    pack = load_pack(pack_dir)
    gen = build("generator", ComponentSpec("forward", {"teachers": [policy(llm, "good")], "only": ["set-size"]}),
                pack=pack)

    async def collect():
        return [r async for r in gen.generate()]

    results = asyncio.run(collect())
    assert [r.task_id for r in results] == ["set-size"] and results[0].passed
    assert isinstance(results[0], EpisodeResult)


def test_cli_reports_bad_parameters_with_paths(pack_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = cli("synth", str(pack_dir), "-g", "forward", "-p", "teachers=[{type: llm}, {type: orcale}]",
               "-p", "select=worst")
    err = capsys.readouterr().err
    assert code == 2
    assert "select: expected all or best, got 'worst'" in err, err
    code = cli("synth", str(pack_dir), "-g", "forward", "-p", "teachers=[{type: llm}, {type: orcale}]")
    err = capsys.readouterr().err
    assert code == 2
    assert "generator.teachers[0].model: missing required key for policy 'llm'" in err
    assert "generator.teachers[1].type: unknown policy 'orcale' (did you mean 'oracle'?)" in err
    assert "Traceback" not in err
    code = cli("synth", str(pack_dir), "-g", "forward", "-p", "teachers")
    assert code == 2 and "expected KEY=VALUE" in capsys.readouterr().err
    (tmp_path / "gen.yaml").write_text("generator: {type: challenger, n: 2}\n")
    code = cli("synth", str(pack_dir), "-g", "forward", "--config", str(tmp_path / "gen.yaml"))
    assert code == 2 and "configures 'challenger', not 'forward'" in capsys.readouterr().err
    (tmp_path / "gen.yaml").write_text("type: forward\nteachers: [{type: llm}]\n")  # the file names it: no -g
    code = cli("synth", str(pack_dir), "--config", str(tmp_path / "gen.yaml"))
    assert code == 2 and "generator.teachers[0].model: missing required key" in capsys.readouterr().err


def test_cli_run_spec_policy_is_the_default_teacher(llm, pack_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec = {"pack": str(pack_dir), "policy": policy(llm, "good"), "seed": 3}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    code = cli("synth", "spec.yaml", "-g", "forward", "-o", "out.jsonl", "--run-dir", "rd", "--json", "-",
               "--no-cache")
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads(out)
    assert data["accepted"] == 2 and data["llm_requests_per_accepted"] == 2.0
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 2
    # the same command again resumes: every item is restored, nothing is asked again
    sent = llm.count
    code = cli("synth", "spec.yaml", "-g", "forward", "--run-dir", "rd", "--json", "-", "--no-cache")
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["restored_items"] == 2 and data["done_items"] == 0 and llm.count == sent
    # `agentsynth status` names the pack and the generator and shows the generation's tallies
    code = cli("status", "rd")
    out = capsys.readouterr().out
    assert code == 0, out
    assert "pack ?" not in out and "run hash -" in out
    assert "generator forward" in out and "policy ?" not in out
    assert "items: 2 of 2 done · accepted 2" in out and "rejected:" in out and "LLM requests: " in out


def test_progress_counts_items():
    progress = Progress("forward")
    report = SynthReport("forward", planned=3)
    progress.update("start", {"item": "a"})
    report.done_items = 1
    progress.update("done", {"accepted": ["a"], "rejected": [{"reason": "x"}], "requests": 4, "report": report})
    task = progress.live.tasks[0]
    assert task.total == 3 and task.completed == 1
    assert "✓1" in task.fields["tally"] and "✗1" in task.fields["tally"] and "LLM 4" in task.fields["tally"]


def test_write_pack_drops_duplicate_requests(pack_dir, tmp_path):
    pack = load_pack(pack_dir)

    def result(task_id, instruction):
        traj = Trajectory(task_id, instruction, metadata={"synth": {
            "new_task": True, "task": {"id": task_id, "instruction": instruction,
                                       "checkers": [{"type": "note_equals", "key": "color", "value": "x"}]},
            "oracle": [{"tool": "write", "arguments": {"key": "color", "value": "x"}}, {"answer": "ok"}]}})
        return EpisodeResult(task_id, 0, 0, "passed", trajectory=traj)

    path = write_pack([result("b", "Set  color to x."), result("a", "set color to x."), result("c", "Other.")],
                      pack, tmp_path / "out")
    data = yaml.safe_load(path.read_text())
    assert [t["id"] for t in data["tasks"]] == ["a", "c"]
    assert data["environment"] == {"type": "notes"}
    assert "ORACLE" in (tmp_path / "out" / "oracle.py").read_text()


def test_explain_lists_parameters(capsys):
    assert cli("synth", "-g", "back_translation", "--explain") == 0
    out = capsys.readouterr().out
    assert out.startswith("back_translation: ") and "  n: int (default 10)" in out and "noop_passes" in out
    assert cli("synth", "-g", "forward") == 2
    assert "missing argument PACK|RUN_SPEC" in capsys.readouterr().err


def test_a_run_directory_continues_only_its_own_generation(llm, pack_dir, tmp_path):
    run_dir = tmp_path / "rd"
    params = {"teachers": [policy(llm, "good")], "only": ["set-size"]}
    run_generator("forward", pack_dir, params, run_dir=run_dir, cache=False)
    with pytest.raises(AgentsynthError, match="holds a different generation") as exc:
        run_generator("forward", pack_dir, {**params, "rollouts": 2}, run_dir=run_dir, cache=False)
    assert "params.rollouts: (absent) -> 2" in str(exc.value)
    with pytest.raises(AgentsynthError, match=r"seed: 0 -> 1"):
        run_generator("forward", pack_dir, params, run_dir=run_dir, cache=False, seed=1)
    # a larger budget is not a different generation
    again = run_generator("forward", pack_dir, params, run_dir=run_dir, cache=False, budget_tokens=10**9)
    assert again.restored_items == 1
    # a directory of `agentsynth run`, or anything else, is refused
    asyncio.run(execute(RunSpec(policy=ComponentSpec("oracle")), load_pack(pack_dir), run_dir=tmp_path / "bench"))
    with pytest.raises(AgentsynthError, match="not a generation"):
        run_generator("forward", pack_dir, params, run_dir=tmp_path / "bench", cache=False)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("x")
    with pytest.raises(AgentsynthError, match="not an agentsynth run directory"):
        run_generator("forward", pack_dir, params, run_dir=tmp_path / "junk", cache=False)


def test_run_spec_with_a_generate_section(llm, pack_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec = {"pack": str(pack_dir), "seed": 2,
            "generate": {"type": "forward", "teachers": [policy(llm, "good"), policy(llm, "bad")]}}
    (tmp_path / "gen.yaml").write_text(yaml.safe_dump(spec))
    code = cli("synth", "gen.yaml", "-o", "out.jsonl", "--run-dir", "rd", "--json", "-", "--no-cache")
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["generator"] == "forward" and data["accepted"] == 2
    assert data["rejected"] == {"failed_checkers": 2}
    # the kernel's `agentsynth run` hands a generation spec to this plugin (run_generation hook)
    code = cli("run", "gen.yaml", "--run-dir", "rd2", "--json", "-")
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["generator"] == "forward" and data["accepted"] == 2
    assert data["run_dir"] == "rd2"
    spec["generate"] = {"type": "fowrard"}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(spec))
    assert cli("run", "bad.yaml") == 2
    assert "generate.type: unknown generator 'fowrard' (did you mean 'forward'?)" in capsys.readouterr().err
    assert cli("synth", "bad.yaml") == 2
    assert "generate.type: no generator 'fowrard' (did you mean 'forward'?)" in capsys.readouterr().err
    spec["generate"] = {"type": "forward", "teachers": [{"type": "llm"}]}
    (tmp_path / "bad2.yaml").write_text(yaml.safe_dump(spec))
    assert cli("synth", "bad2.yaml") == 2
    assert "generator.teachers[0].model: missing required key for policy 'llm'" in capsys.readouterr().err
