"""`agentsynth pack contamination`: n-gram overlap with a corpus, canaries, the held-out variant.

Against the sql plugin's real `core` pack (test-with agentsynth-sql), through the real command line;
the held-out variant is checked with the kernel's own `pack validate` and by replaying the original
oracle's transcripts on it with `agentsynth bench`.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentsynth_export import contamination
from agentsynth_export.common import pack_canary
from agentsynth_export.contamination import contamination_report
from agentsynth_kernel import AgentsynthError, load_pack, oracle_actions

pytest.importorskip("agentsynth_sql")


def agentsynth(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "agentsynth"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AGENTSYNTH_LOAD_PLUGINS": "export,sql"}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def core():
    return load_pack("core")


def texts_of(pack, task_id):
    task = next(t for t in pack.tasks if t.id == task_id)
    answer = "\n".join(a.content for a in oracle_actions(pack, task) if hasattr(a, "content"))
    return task.instruction, answer


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def unrelated(path: Path) -> Path:
    lines = [{"messages": [{"role": "user", "content": f"Write a haiku about autumn leaves number {i}"},
                           {"role": "assistant", "content": "Red leaves drift slowly / over the quiet river / the year "
                                                            "lets go again"}]} for i in range(200)]
    return write_jsonl(path, lines)


def row(report, task_id):
    return next(r for r in report["tasks"] if r["id"] == task_id)


def test_a_corpus_holding_a_task_verbatim_flags_that_task_only(core, tmp_path):
    instruction, answer = texts_of(core, "refund-and-restock")
    assert len(instruction.split()) >= 13  # a long text: measured by 13-gram overlap, not verbatim search
    corpus = write_jsonl(tmp_path / "train.jsonl", [
        {"messages": [{"role": "user", "content": instruction.upper()}, {"role": "assistant", "content": answer}]},
        {"text": "Something else entirely about gardening and tomatoes in the summer"},
    ])
    report, _ = contamination_report(core, [corpus], n=13)
    hit = row(report, "refund-and-restock")
    assert hit["contaminated"] and hit["instruction"]["overlap"] == 1.0 and not hit["instruction"]["verbatim_only"]
    assert hit["answer"]["overlap"] == 1.0
    assert report["contaminated"] == ["refund-and-restock"]
    assert report["corpus"]["records"] == 2


def test_an_unrelated_corpus_flags_nothing(core, tmp_path):
    report, _ = contamination_report(core, [unrelated(tmp_path / "c.jsonl")], n=13)
    assert report["contaminated"] == [] and report["max_overlap"] == 0.0 and not report["canary_found"]
    assert all(r["canary"] == pack_canary(core) for r in report["tasks"])


def test_partial_overlap_is_a_fraction_and_the_threshold_decides(core, tmp_path):
    instruction, _ = texts_of(core, "ship-december-backlog")
    words = instruction.split()
    # the first 14 words: 2 of the instruction's 13-grams
    corpus = tmp_path / "part.txt"
    corpus.write_text(" ".join(words[:14]) + "\n", encoding="utf-8")
    report, _ = contamination_report(core, [corpus], n=13)
    r = row(report, "ship-december-backlog")
    total = r["instruction"]["ngrams"]
    assert r["instruction"]["seen"] == 2 and r["instruction"]["overlap"] == round(2 / total, 4)
    assert not r["contaminated"]
    low, _ = contamination_report(core, [corpus], n=13, threshold=1 / total)
    assert row(low, "ship-december-backlog")["contaminated"]


def test_text_across_lines_and_chunks_and_gzip_is_found(core, tmp_path, monkeypatch):
    instruction, _ = texts_of(core, "refund-and-restock")
    words = instruction.split()
    monkeypatch.setattr(contamination, "TEXT_CHUNK_CHARS", 64)  # chunks end mid-instruction
    padding = "\n".join(f"filler line {i} of an unrelated book" for i in range(30))
    text = padding + "\n" + "\n".join(" ".join(words[i : i + 3]) for i in range(0, len(words), 3)) + "\n" + padding
    corpus = tmp_path / "book.txt.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as f:
        f.write(text)
    report, _ = contamination_report(core, [corpus], n=13)
    assert row(report, "refund-and-restock")["instruction"]["overlap"] == 1.0
    assert report["corpus"]["records"] > 10  # read in many chunks


def test_invisible_characters_and_fullwidth_letters_do_not_hide_a_task(core, tmp_path):
    instruction, _ = texts_of(core, "refund-and-restock")
    hidden = "\u200b".join(instruction)  # a zero-width space between every character
    fullwidth = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in instruction)
    corpus = write_jsonl(tmp_path / "evasive.jsonl", [{"a": hidden}, {"b": fullwidth.replace(" ", "\u00ad ")}])
    report, _ = contamination_report(core, [corpus])
    assert row(report, "refund-and-restock")["instruction"]["overlap"] == 1.0
    for text in (hidden, fullwidth):  # each on its own
        one = write_jsonl(tmp_path / "one.jsonl", [{"t": text}])
        assert row(contamination_report(core, [one])[0], "refund-and-restock")["contaminated"]


def test_a_huge_jsonl_line_is_read_in_chunks(core, tmp_path, monkeypatch):
    instruction, _ = texts_of(core, "refund-and-restock")
    monkeypatch.setattr(contamination, "MAX_LINE_CHARS", 256)
    monkeypatch.setattr(contamination, "TEXT_CHUNK_CHARS", 100)
    filler = " ".join(f"word{i}" for i in range(300))
    corpus = write_jsonl(tmp_path / "big.jsonl", [{"t": filler + " " + instruction + " " + filler}, {"u": "next"}])
    report, _ = contamination_report(core, [corpus])
    assert row(report, "refund-and-restock")["instruction"]["overlap"] == 1.0
    assert report["corpus"]["records"] > 20  # the long line went through as text chunks, the next line as JSON


def test_deeply_nested_or_broken_json_lines_are_read_as_text(core, tmp_path):
    instruction, _ = texts_of(core, "refund-and-restock")
    deep = "[" * 100_000 + json.dumps(instruction) + "]" * 100_000
    nested = json.dumps(instruction)
    for _ in range(500):  # decodable, but deep
        nested = '{"k": [' + nested + "]}"
    corpus = tmp_path / "deep.jsonl"
    corpus.write_text(deep + "\n" + nested + "\n{not json " + instruction + "\n", encoding="utf-8")
    report, _ = contamination_report(core, [corpus])
    assert row(report, "refund-and-restock")["instruction"]["overlap"] == 1.0
    assert report["corpus"]["records"] == 3


def test_the_held_out_copy_leaves_out_links_out_of_the_pack(core, tmp_path):
    from agentsynth_export.contamination import relabel_tasks, write_held_out

    pack_dir = tmp_path / "mine"
    shutil.copytree(core.base_dir, pack_dir, ignore=shutil.ignore_patterns("__pycache__"))
    secret = tmp_path / "secret.txt"
    secret.write_text("not the pack's")
    (pack_dir / "leak.txt").symlink_to(secret)
    (pack_dir / "inside.sql").symlink_to(pack_dir / "schema.sql")
    pack = load_pack(pack_dir)
    _, oracles = contamination_report(pack, [unrelated(tmp_path / "c.jsonl")])
    relabelled, skipped = relabel_tasks(pack, oracles, verify=False)
    assert relabelled and skipped
    out = write_held_out(pack, relabelled, tmp_path / "out")
    assert not (out / "leak.txt").exists() and (out / "inside.sql").is_file()
    assert not (out / "oracle.py").read_text().count("1005")  # the original ids are gone from the oracle


def test_a_short_task_counts_only_verbatim(core, tmp_path):
    instruction, _ = texts_of(core, "mark-shipped")
    assert len(instruction.split()) < 13
    near = write_jsonl(tmp_path / "near.jsonl", [{"t": instruction.replace("shipped", "delivered")}])
    assert not row(contamination_report(core, [near])[0], "mark-shipped")["contaminated"]
    same = write_jsonl(tmp_path / "same.jsonl", [{"t": "As seen in a log: " + instruction.lower() + " (done)"}])
    assert row(contamination_report(core, [same])[0], "mark-shipped")["contaminated"]


def test_the_pack_canary_in_the_corpus_flags_every_task(core, tmp_path):
    corpus = write_jsonl(tmp_path / "leak.jsonl", [{"messages": [], "canary": pack_canary(core)}])
    report, _ = contamination_report(core, [corpus])
    assert report["canary_found"] and len(report["contaminated"]) == len(core.tasks)
    assert report["corpus"]["records_with_an_agentsynth_canary"] == 1


def test_missing_or_bad_corpus_files_are_path_qualified_errors(core, tmp_path):
    with pytest.raises(AgentsynthError, match=r"nope\.jsonl: --corpus: no such file"):
        contamination_report(core, [tmp_path / "nope.jsonl"])
    with pytest.raises(AgentsynthError, match="is a directory"):
        contamination_report(core, [tmp_path])


# --- through the command line --------------------------------------------------------------------------------


def test_command_flags_fails_above_and_writes_json(core, tmp_path):
    instruction, answer = texts_of(core, "refund-and-restock")
    dirty = write_jsonl(tmp_path / "dirty.jsonl", [{"prompt": instruction, "completion": answer}])
    clean = unrelated(tmp_path / "clean.jsonl")
    proc = agentsynth("pack", "contamination", "core", "--corpus", str(dirty), "--corpus", str(clean),
                      "--fail-above", "0.5")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "refund-and-restock" in proc.stdout and "CONTAMINATED" in proc.stdout
    assert "1 of 22 tasks contaminated: refund-and-restock" in proc.stdout
    assert "contamination above 0.5" in proc.stderr
    proc = agentsynth("pack", "contamination", "core", "--corpus", str(clean), "--fail-above", "0.5", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["contaminated"] == [] and report["corpus"]["records"] == 200 and report["n"] == 13


def test_command_bad_input_is_a_clear_error(tmp_path):
    clean = unrelated(tmp_path / "clean.jsonl")
    proc = agentsynth("pack", "contamination", "core", "--corpus", str(tmp_path / "missing.jsonl"))
    assert proc.returncode == 2 and "missing.jsonl: --corpus: no such file" in proc.stderr
    proc = agentsynth("pack", "contamination", "no-such-pack", "--corpus", str(clean))
    assert proc.returncode == 2 and "no-such-pack" in proc.stderr and "no such pack" in proc.stderr
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("keep me")
    proc = agentsynth("pack", "contamination", "core", "--corpus", str(clean), "--held-out-out", str(full))
    assert proc.returncode == 2 and "full: --held-out-out: exists and is not an empty directory" in proc.stderr
    assert (full / "x").read_text() == "keep me"
    for p in (proc,):
        assert "Traceback" not in p.stderr


@pytest.fixture(scope="module")
def held_out(tmp_path_factory):
    base = tmp_path_factory.mktemp("heldout")
    clean = unrelated(base / "clean.jsonl")
    out = base / "core-heldout"
    proc = agentsynth("pack", "contamination", "core", "--corpus", str(clean), "--held-out-out", str(out), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, json.loads(proc.stdout)


def test_the_held_out_variant_is_relabelled_and_reports_what_was_not(core, held_out):
    out, report = held_out
    info = report["held_out"]
    relabelled, skipped = info["relabelled"], info["not_relabelled"]
    assert len(relabelled) >= 3 and set(relabelled) | set(skipped) == {t.id for t in core.tasks}
    assert not set(relabelled) & set(skipped)
    # answer-checked tasks cannot be relabelled by the sql world (a memorised answer would still pass)
    assert "count-pending-orders" in skipped and "answer" in skipped["count-pending-orders"]
    held = load_pack(out)
    assert held.id == "core-heldout" and [t.id for t in held.tasks] == relabelled
    original = {t.id: t for t in core.tasks}
    for task in held.tasks:
        assert task.instruction != original[task.id].instruction or task.checkers != original[task.id].checkers
    assert (out / "oracle.py").is_file() and (out / "schema.sql").is_file()


def test_the_held_out_variant_passes_pack_validate(held_out):
    out, _ = held_out
    proc = agentsynth("pack", "validate", str(out), "--random-trials", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "all gates pass" in proc.stdout


def test_the_original_oracle_replayed_fails_every_relabelled_task(held_out, tmp_path, core):
    out, report = held_out
    replay = tmp_path / "replay"
    shutil.copytree(out, replay)
    shutil.copy(core.oracle_path, replay / "oracle.py")  # the memorised transcripts of the original pack
    proc = agentsynth("bench", "--pack", str(replay), "--policy", "oracle", "--json", str(tmp_path / "r.json"), "-q")
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["episodes"] == len(report["held_out"]["relabelled"])
    assert result["counts"].get("passed", 0) == 0, proc.stdout
    # and the relabelled oracle passes them all
    proc = agentsynth("bench", "--pack", str(out), "--policy", "oracle", "--min-pass-rate", "100%", "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_plugin_whose_perturb_task_raises_fails_that_task_not_the_command(core, tmp_path):
    from agentsynth_export.contamination import relabel_tasks
    from agentsynth_kernel import get_host, hookimpl

    class Broken:
        @hookimpl
        def perturb_task(self, pack, task, seed):
            if task.id == "mark-shipped":
                raise RuntimeError("relabeller exploded")
            return None  # the next plugin (sql) answers for the others

    host = get_host()
    host.pm.register(Broken(), name="test-broken-perturb")
    try:
        _, oracles = contamination_report(core, [unrelated(tmp_path / "c.jsonl")])
        relabelled, skipped = relabel_tasks(core, oracles, verify=False)
    finally:
        host.pm.unregister(name="test-broken-perturb")
    assert "relabeller exploded" in skipped["mark-shipped"]
    assert relabelled and "mark-shipped" not in [t.id for t, _ in relabelled]


def test_a_broken_oracle_is_an_error_naming_its_file(core, tmp_path):
    pack_dir = tmp_path / "broken"
    shutil.copytree(core.base_dir, pack_dir, ignore=shutil.ignore_patterns("__pycache__"))
    (pack_dir / "oracle.py").write_text("ORACLE = {\n", encoding="utf-8")
    pack = load_pack(pack_dir)
    with pytest.raises(AgentsynthError, match=r"broken/oracle\.py"):
        contamination_report(pack, [unrelated(tmp_path / "c.jsonl")])
    proc = agentsynth("pack", "contamination", str(pack_dir), "--corpus", str(tmp_path / "c.jsonl"))
    assert proc.returncode == 2 and "oracle.py" in proc.stderr and "Traceback" not in proc.stderr
