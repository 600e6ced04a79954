"""Every exporter, loaded back with the library its users use."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pyarrow.parquet as pq
import pytest

from agentsynth_export.common import CANARY_PREFIX, canary_string, reward
from agentsynth_export.exporters import (
    ADPExporter,
    DPOExporter,
    HFExporter,
    JsonlExporter,
    OpenAIExporter,
    ParquetExporter,
    ShareGPTExporter,
    parquet_schema,
    parse_sharegpt_tool_calls,
)
from agentsynth_export.importers import OpenAIImporter
from agentsynth_kernel import AgentsynthError, Answer, EpisodeResult, ToolCall, read_jsonl, to_openai_messages
from conftest import agentsynth, make_result, write_run


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# --- jsonl ---------------------------------------------------------------------------------------------


def test_jsonl_round_trips_every_record_with_provenance(results, tmp_path):
    out = tmp_path / "x.jsonl"
    assert JsonlExporter(include_test=True).export(results, out) == len(results)
    back = list(read_jsonl(out, EpisodeResult))
    assert back == results
    rows = lines(out)
    assert rows[0]["provenance"]["pack_hash"] == "sha256:abc"
    # canary only on test-split records (auto), and it is the pack's canary
    assert rows[0]["canary"] == canary_string(results[0]) and rows[0]["canary"].startswith(CANARY_PREFIX)
    assert all("canary" not in r for r, res in zip(rows, results, strict=True) if res.split != "test")


def test_jsonl_canary_modes_and_filters(results, tmp_path):
    out = tmp_path / "x.jsonl"
    JsonlExporter(canary="never", include_test=True).export(results, out)
    assert not any("canary" in r for r in lines(out))
    JsonlExporter(canary="always", canary_string="MY-CANARY").export(results, out)
    assert {r["canary"] for r in lines(out)} == {"MY-CANARY"}
    assert JsonlExporter(filter="passed", include_test=True).export(results, out) == 3
    assert {r["status"] for r in lines(out)} == {"passed"}
    # min_reward uses the judge's reward dimension when present, else the outcome
    assert JsonlExporter(min_reward=0.5, include_test=True).export(results, out) == 2
    assert [(r["task_id"], r["trial"]) for r in lines(out)] == [("add-1", 0), ("add-2", 0)]


def test_bad_parameters_are_clean_errors(tmp_path, results):
    with pytest.raises(AgentsynthError, match="filter: expected one of passed, all, got 'pased'"):
        JsonlExporter(filter="pased")
    with pytest.raises(AgentsynthError, match="canary"):
        OpenAIExporter(canary="sometimes")
    with pytest.raises(AgentsynthError, match="is a directory"):
        JsonlExporter().export(results, tmp_path)
    with pytest.raises(AgentsynthError, match=r"dedup\.thresh: unknown key \(did you mean 'threshold'\?\)"):
        OpenAIExporter(dedup={"thresh": 0.9})
    with pytest.raises(AgentsynthError, match=r"decontaminate\.packs: unknown key \(did you mean 'pack'\?\)"):
        OpenAIExporter(decontaminate={"packs": "core"})
    with pytest.raises(AgentsynthError, match="min_reward: expected a number"):
        OpenAIExporter(min_reward="high")
    (tmp_path / "afile").write_text("x")
    for exporter in (JsonlExporter(), ParquetExporter()):
        with pytest.raises(AgentsynthError, match=r"afile/out: cannot write the (jsonl|parquet) export"):
            exporter.export(results, tmp_path / "afile" / "out")


# --- openai --------------------------------------------------------------------------------------------

ROLES = {"system", "user", "assistant", "tool"}


def check_openai_messages(messages: list[dict]) -> None:
    """The shape OpenAI's fine-tuning API and TRL's SFT (messages + tools) accept, strictly."""
    assert messages and messages[-1]["role"] == "assistant"
    assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id", "name", "weight"} for m in messages)
    assert all(m["role"] in ROLES for m in messages)
    open_calls: list[str] = []
    for m in messages:
        if m["role"] == "assistant":
            assert not open_calls, "every tool call is answered before the next assistant turn"
            assert m["content"] is None or isinstance(m["content"], str)
            for call in m.get("tool_calls", []):
                assert set(call) == {"id", "type", "function"} and call["type"] == "function"
                assert set(call["function"]) == {"name", "arguments"}
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
                open_calls.append(call["id"])
            if not m.get("tool_calls"):
                assert isinstance(m["content"], str)
        elif m["role"] == "tool":
            assert m["tool_call_id"] == open_calls.pop(0), "results follow their calls in order"
            assert isinstance(m["content"], str)
        else:
            assert isinstance(m["content"], str)
    assert not open_calls


def test_openai_shape_is_strict_and_only_passed_by_default(results, tmp_path):
    out = tmp_path / "sft.jsonl"
    assert OpenAIExporter(include_test=True).export(results, out) == 3
    rows = lines(out)
    for row in rows:
        assert set(row) <= {"messages", "tools", "canary"}
        check_openai_messages(row["messages"])
        for tool in row["tools"]:
            assert tool["type"] == "function" and set(tool["function"]) == {"name", "description", "parameters"}
    first = rows[0]["messages"]
    assert [m["role"] for m in first] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    assert len(first[2]["tool_calls"]) == 2  # the parallel calls of turn 0 are one assistant message
    # what TRL does with it first: datasets infers one Arrow schema for all lines
    import datasets

    ds = datasets.load_dataset("json", data_files=str(out), split="train", cache_dir=str(tmp_path / "cache"))
    assert ds.column_names[:2] == ["messages", "tools"] and len(ds) == 3
    call = ds[0]["messages"][2]["tool_calls"][1]
    assert call["function"] == {"name": "get", "arguments": '{"key": "b"}'} and call["type"] == "function"
    assert ds[0]["tools"][0]["function"]["parameters"]["required"] == ["key"]


def test_openai_round_trips_through_the_openai_importer(results, tmp_path):
    out = tmp_path / "sft.jsonl"
    OpenAIExporter(filter="all", include_test=True).export(results, out)
    back = list(OpenAIImporter().read(out))
    originals = [r.trajectory for r in results if r.trajectory is not None]
    assert len(back) == len(originals)
    for orig, imp in zip(originals, back, strict=True):
        assert imp.system_prompt == orig.system_prompt
        assert imp.instruction.startswith(orig.instruction)
        assert [(c.name, c.arguments, c.id) for c in imp.tool_calls] == [(c.name, c.arguments, c.id) for c in orig.tool_calls]
        assert [s.turn for s in imp.steps] == [s.turn for s in orig.steps]
        assert [s.observation.content for s in imp.steps if s.observation] == [
            s.observation.content for s in orig.steps if s.observation]
        assert imp.final_answer == orig.final_answer
        assert [t.name for t in imp.tools] == [t.name for t in orig.tools]


def test_openai_arguments_as_objects_and_metadata(results, tmp_path):
    out = tmp_path / "sft.jsonl"
    OpenAIExporter(arguments="object", include_metadata=True, canary="never", include_test=True).export(results, out)
    row = lines(out)[0]
    assert row["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"key": "a"}
    assert (row["task_id"], row["status"], row["reward"]) == ("add-1", "passed", 1.0)
    assert "canary" not in row


def test_empty_trajectories_are_skipped_not_written(tmp_path):
    r = make_result("t", 0, True)
    r.trajectory.steps = []
    exporter = OpenAIExporter()
    with pytest.raises(AgentsynthError, match="2 have no assistant turn"):
        exporter.export([r, r], tmp_path / "o.jsonl")
    assert exporter.stats["skipped_empty"] == 2 and not (tmp_path / "o.jsonl").exists()
    assert exporter.export([r, make_result("u", 0, True)], tmp_path / "o.jsonl") == 1


# --- sharegpt ------------------------------------------------------------------------------------------


def test_sharegpt_loads_with_datasets_and_tool_calls_parse_back(results, tmp_path):
    import datasets

    out = tmp_path / "sharegpt.jsonl"
    assert ShareGPTExporter(include_test=True).export(results, out) == 3
    ds = datasets.load_dataset("json", data_files=str(out), split="train", cache_dir=str(tmp_path / "cache"))
    assert len(ds) == 3
    conv = ds[0]["conversations"]
    assert [t["from"] for t in conv] == ["system", "human", "gpt", "tool", "tool", "gpt", "tool", "gpt"]
    calls = [c for t in conv if t["from"] == "gpt" for c in parse_sharegpt_tool_calls(t["value"])]
    orig = results[0].trajectory
    assert [(c["name"], c["arguments"]) for c in calls] == [(c.name, c.arguments) for c in orig.tool_calls]
    assert conv[-1]["value"] == orig.final_answer
    assert [t["name"] for t in json.loads(ds[0]["tools"])] == ["get", "set"]


# --- adp -----------------------------------------------------------------------------------------------


def test_adp_typed_steps(results, tmp_path):
    out = tmp_path / "adp.jsonl"
    assert ADPExporter(include_test=True).export(results, out) == 3
    row = lines(out)[0]
    assert row["schema_version"] == "1.2.0" and row["id"] == "add-1#0#1000"
    classes = [c["class_"] for c in row["content"]]
    assert classes[:2] == ["text_observation", "text_observation"]
    assert classes.count("api_action") == 3 and classes[-1] == "message_action"
    actions = [c for c in row["content"] if c["class_"] == "api_action"]
    assert [(a["function"], a["kwargs"]) for a in actions] == [(c.name, c.arguments) for c in results[0].trajectory.tool_calls]
    assert all(set(c) <= {"class_", "content", "source", "name", "function", "kwargs", "description",
                          "reasoning_content", "reward"} for c in row["content"])
    assert {c["source"] for c in row["content"] if c["class_"] == "text_observation"} <= {"user", "environment"}
    assert row["content"][-1]["reward"] == 1.0
    assert row["details"]["canary"].startswith(CANARY_PREFIX) and row["details"]["provenance"]["run_id"] == "r123"


# --- dpo -----------------------------------------------------------------------------------------------


def test_dpo_pairs_passing_against_failing_trials_of_a_task(results, tmp_path):
    out = tmp_path / "dpo.jsonl"
    exporter = DPOExporter(include_test=True)
    assert exporter.export(results, out) == 3
    rows = lines(out)
    assert [(r["task_id"], r["margin"]) for r in rows] == [("add-1", 1.0), ("add-2", 0.95), ("add-2", 0.3)]
    for r in rows:
        assert [m["role"] for m in r["prompt"]] == ["system", "user"]
        check_openai_messages(r["prompt"] + r["chosen"])
        check_openai_messages(r["prompt"] + r["rejected"])
        assert r["chosen"][-1]["content"] == "done" and r["rejected"][-1]["content"] == "the sum is 4"
        assert r["margin"] == pytest.approx(r["chosen_reward"] - r["rejected_reward"])
    assert exporter.stats["tasks_without_pair"] == 1  # add-3 only failed
    assert DPOExporter(max_pairs_per_task=1, min_margin=0.5, include_test=True).export(results, out) == 2
    assert DPOExporter().export(results, out) == 2  # add-1 is a test-split task


def test_dpo_loads_as_a_preference_dataset(results, tmp_path):
    import datasets

    out = tmp_path / "dpo.jsonl"
    DPOExporter(include_test=True).export(results, out)
    ds = datasets.load_dataset("json", data_files=str(out), split="train", cache_dir=str(tmp_path / "cache"))
    assert {"prompt", "chosen", "rejected", "margin"} <= set(ds.column_names)
    assert ds[0]["chosen"][-1]["role"] == "assistant"


# --- parquet / hf --------------------------------------------------------------------------------------


def test_parquet_has_the_stable_schema_and_round_trips(results, tmp_path):
    out = tmp_path / "x.parquet"
    assert ParquetExporter(batch_size=2, include_test=True).export(results, out) == len(results)
    table = pq.read_table(out)
    assert table.schema.equals(parquet_schema(), check_metadata=False)
    assert table.schema.metadata[b"agentsynth.schema"] == b"episode-v1"
    assert pq.ParquetFile(out).metadata.num_row_groups == 4
    rows = table.to_pylist()
    assert [msgspec.json.decode(r["record"], type=EpisodeResult) for r in rows] == results
    first = rows[0]
    assert first["passed"] is True and first["reward"] == 1.0 and first["num_tool_calls"] == 3
    expected = to_openai_messages(results[0].trajectory)
    assert [m["role"] for m in first["messages"]] == [m["role"] for m in expected]
    assert first["messages"][2]["tool_calls"][1]["function"] == expected[2]["tool_calls"][1]["function"]
    assert first["canary"].startswith(CANARY_PREFIX) and rows[2]["canary"] is None
    assert rows[-1]["status"] == "error" and rows[-1]["messages"] == [] and rows[-1]["error_kind"] == "environment"
    # a selection with one record is written with the same schema
    ParquetExporter().export(results[2:3], tmp_path / "one.parquet")
    assert pq.read_table(tmp_path / "one.parquet").schema.equals(parquet_schema(), check_metadata=False)


def test_hf_dataset_loads_from_disk(results, tmp_path):
    import datasets

    out = tmp_path / "ds"
    assert HFExporter(include_test=True).export(results, out) == len(results)
    ds = datasets.load_from_disk(str(out))
    assert len(ds) == len(results)
    assert ds[0]["task_id"] == "add-1" and ds[0]["messages"][2]["tool_calls"][0]["function"]["name"] == "get"
    assert msgspec.json.decode(ds[3]["record"], type=EpisodeResult) == results[3]
    assert ds.filter(lambda r: r["passed"]).num_rows == 3
    # a re-export replaces the earlier dataset; a foreign non-empty directory is refused
    assert HFExporter(filter="passed", include_test=True).export(results, out) == 3
    assert len(datasets.load_from_disk(str(out))) == 3
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(AgentsynthError, match="not empty"):
        HFExporter().export(results, tmp_path / "other")


# --- through the pipeline: redaction, dedup, decontamination ----------------------------------------------


def test_export_redacts_dedups_and_decontaminates(tmp_path):
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "pack.yaml").write_text(
        "id: bench\nenvironment: {type: kv}\ntasks:\n"
        "  - id: secret-task\n    instruction: Compute the quarterly revenue growth of the northern region from the sales table\n"
    )
    leaked = make_result("x", 0, True, instruction="Compute the quarterly revenue growth of the northern region from the sales table please")
    base = make_result("y", 0, True, instruction="Mail alice@example.com with key sk-abcdefghijklmnopqrstuvwx")
    dup = make_result("y", 1, True, instruction="mail  ALICE@example.com with key sk-abcdefghijklmnopqrstuvwx")
    out = tmp_path / "o.jsonl"
    exporter = OpenAIExporter(redact=True, dedup=True, decontaminate=str(pack))
    assert exporter.export([leaked, base, dup], out) == 1
    text = out.read_text()
    assert "alice@example.com" not in text and "[EMAIL]" in text and "sk-abcdef" not in text
    summary = exporter.summary()
    # redaction runs before dedup (duplicates are compared redacted), so both copies count; the key was
    # already masked by the secret redaction every export gets
    assert summary["redacted"]["email"] == 2 and summary["redacted"]["api_key"] == 0
    assert "<redacted>" in text and summary["secrets_redacted"] == 2
    assert summary["dedup"]["exact"] == 1 and summary["dedup"]["contaminated"] == 1
    assert summary["dedup"]["contamination"] == {"task:secret-task": 1}


# --- the command ---------------------------------------------------------------------------------------


def test_export_command_writes_every_format(run_dir, tmp_path):
    for fmt, name in (("jsonl", "a.jsonl"), ("openai", "b.jsonl"), ("parquet", "c.parquet")):
        proc = agentsynth("export", str(run_dir), "--format", fmt, "-o", str(tmp_path / name), "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["written"] == {"jsonl": 5, "openai": 2, "parquet": 5}[fmt]
    proc = agentsynth("export", str(run_dir), "-f", "openai", "-o", str(tmp_path / "d.jsonl"), "--filter", "all",
                      "--min-reward", "0.5")
    assert proc.returncode == 0 and "wrote 1 openai records" in proc.stdout


def test_export_command_errors_are_clean(tmp_path, run_dir):
    proc = agentsynth("export", str(tmp_path / "nope"), "-f", "jsonl", "-o", str(tmp_path / "x"))
    assert proc.returncode == 2 and "no such run directory" in proc.stderr and "Traceback" not in proc.stderr
    (tmp_path / "empty").mkdir()
    proc = agentsynth("export", str(tmp_path / "empty"), "-f", "jsonl", "-o", str(tmp_path / "x"))
    assert proc.returncode == 2 and "not a run directory" in proc.stderr
    proc = agentsynth("export", str(run_dir), "-f", "opneai", "-o", str(tmp_path / "x"))
    assert proc.returncode == 2 and "did you mean 'openai'" in proc.stderr and "Traceback" not in proc.stderr


def test_reward_prefers_judge_reward():
    assert reward(make_result("t", 0, True, scores={"judge.reward": 0.25})) == 0.25
    assert reward(make_result("t", 0, False)) == 0.0
    r = make_result("t", 0, True)
    assert isinstance(r.trajectory.steps[-1].action, Answer) and isinstance(r.trajectory.steps[0].action, ToolCall)
    assert reward(r) == 1.0


def test_run_spec_export_entry_is_accepted(tmp_path):
    """The engine builds exporters from `export: [{type, path, ...}]`; the params must pass its check."""
    from agentsynth_kernel import ComponentSpec, build, check_component, get_host

    host = get_host()
    cspec = ComponentSpec("openai", {"path": "out.jsonl", "filter": "all", "dedup": {"threshold": 0.9}})
    assert check_component("exporter", cspec, "export[0]", host) == []
    assert check_component("exporter", ComponentSpec("openai", {"pth": "x"}), "export[0]", host) == [
        "export[0].pth: unknown key for exporter 'openai' (did you mean 'path'?)"]
    exporter = build("exporter", cspec, host=host, base_dir=tmp_path)
    r = make_result("t", 0, True)
    assert exporter.export([r, r], tmp_path / exporter.path) == 1
    write_run(tmp_path / "run", [r])


# --- the test split stays out of training data -------------------------------------------------------------

ALL_FORMATS = (JsonlExporter, OpenAIExporter, ShareGPTExporter, ADPExporter, DPOExporter, ParquetExporter, HFExporter)


def _task_ids(exporter_cls, out: Path) -> list[str]:
    if exporter_cls is HFExporter:
        import datasets

        return list(datasets.load_from_disk(str(out))["task_id"])
    if exporter_cls is ParquetExporter:
        return pq.read_table(out).column("task_id").to_pylist()
    rows = lines(out)
    if exporter_cls is OpenAIExporter:
        return [r["messages"][1]["content"].rsplit("(", 1)[1].split(")")[0] for r in rows]
    if exporter_cls is ShareGPTExporter:
        return [r["conversations"][1]["value"].rsplit("(", 1)[1].split(")")[0] for r in rows]
    if exporter_cls is ADPExporter:
        return [r["details"]["task_id"] for r in rows]
    return [r["task_id"] for r in rows]


@pytest.mark.parametrize("exporter_cls", ALL_FORMATS, ids=lambda c: c.format_name)
def test_every_format_leaves_the_test_split_out_by_default(exporter_cls, results, tmp_path, caplog):
    out = tmp_path / ("ds" if exporter_cls is HFExporter else "out")
    exporter = exporter_cls(filter="all") if exporter_cls is not DPOExporter else exporter_cls()
    n = exporter.export(results, out)
    assert n > 0 and "add-1" not in _task_ids(exporter_cls, out)  # add-1 is the test-split task
    assert exporter.summary()["test_split"] == 2 and "warnings" not in exporter.summary()
    # asked for explicitly: included, with a warning in the summary and on the log
    exporter = exporter_cls(filter="all", include_test=True) if exporter_cls is not DPOExporter else exporter_cls(include_test=True)
    with caplog.at_level("WARNING", logger="agentsynth_export"):
        exporter.export(results, out)
    assert "add-1" in _task_ids(exporter_cls, out)
    (warning,) = exporter.summary()["warnings"]
    assert "test-split" in warning and "include_test" in warning and warning in caplog.text


def test_export_command_include_test_flag_warns(run_dir, tmp_path):
    out = tmp_path / "sft.jsonl"
    proc = agentsynth("export", str(run_dir), "-f", "openai", "--filter", "all", "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["written"] == 4 and summary["test_split"] == 2 and "test-split" not in proc.stderr
    proc = agentsynth("export", str(run_dir), "-f", "openai", "--filter", "all", "--include-test", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "wrote 6 openai records" in proc.stdout and "warning:" in proc.stderr and "test-split" in proc.stderr


# --- nothing to write is an error, and leaves no file --------------------------------------------------------


def test_dpo_without_pairs_fails_and_writes_nothing(tmp_path):
    only_passed = [make_result("a", 0, True), make_result("b", 0, True), make_result("c", 0, False)]
    out = tmp_path / "dpo.jsonl"
    with pytest.raises(AgentsynthError, match=r"no task has both a passing and a failing trial.*--trials 2"):
        DPOExporter().export(only_passed, out)
    assert not out.exists()
    run = write_run(tmp_path / "run", only_passed)
    proc = agentsynth("export", str(run), "-f", "dpo", "-o", str(out))
    assert proc.returncode == 2 and "no task has both a passing and a failing trial" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


@pytest.mark.parametrize("exporter_cls", ALL_FORMATS, ids=lambda c: c.format_name)
def test_an_empty_export_is_an_error_that_says_why(exporter_cls, tmp_path):
    out = tmp_path / ("ds" if exporter_cls is HFExporter else "out")
    failed = [make_result("a", 0, False), make_result("b", 0, True, split="test")]
    exporter = exporter_cls(filter="passed") if exporter_cls is not DPOExporter else exporter_cls()
    with pytest.raises(AgentsynthError, match="nothing to write") as info:
        exporter.export(failed, out)
    assert not out.exists() and list(tmp_path.iterdir()) == []  # no empty file, no temporary left
    message = str(info.value)
    assert str(out) in message and "1 of the test split" in message and "--include-test" in message
    if exporter_cls is not DPOExporter:
        assert "1 did not pass" in message and "--filter all" in message
    with pytest.raises(AgentsynthError, match="no episodes"):
        exporter_cls().export([], out)
    # an earlier export at the same path is left as it was
    if exporter_cls is not HFExporter:
        out.write_text("earlier\n")
        with pytest.raises(AgentsynthError):
            exporter.export(failed, out)
        assert out.read_text() == "earlier\n"


# --- a target that is not a regular file (a FIFO, /dev/null, /dev/stdout) is written in place ----------------


@pytest.mark.parametrize("exporter_cls", (JsonlExporter, OpenAIExporter), ids=lambda c: c.format_name)
def test_a_fifo_target_is_written_to_not_replaced(exporter_cls, results, tmp_path):
    """The temporary-file-then-rename guard replaced a device or FIFO by a regular file (as root, /dev/null)."""
    import os
    import stat

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader is there, so the exporter's open does not block
    try:
        written = exporter_cls(filter="all", include_test=True).export(results, fifo)
        data = b""
        while chunk := os.read(reader, 1 << 16):
            data += chunk
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.stat().st_mode), "the FIFO was replaced by a regular file"
    assert written > 0 and data.count(b"\n") == written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary left beside it
