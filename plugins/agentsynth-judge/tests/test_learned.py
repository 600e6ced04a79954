"""The learned verifier on real labelled runs of the `core` pack: features, training report, the file's
provenance and round trip, and the clear errors of bad input."""

from __future__ import annotations

import hashlib
import json
import zipfile

import pytest
from click.testing import CliRunner

from agentsynth_judge import read_run
from agentsynth_judge.learned import (
    FEATURE_VERSION,
    Example,
    VerifierError,
    featurize,
    load_verifier,
    train_verifier,
)
from agentsynth_kernel import RunStore
from agentsynth_kernel.cli import cli
from conftest import TRAIN_RUNS, read, run_cli, traj, write


def test_features_come_from_the_trajectory_alone():
    t = traj(read("color", "red"), write("color", "blue"), "The note 'color' is now blue (was 'red', 2 steps).")
    f = featurize(t)
    assert f.numeric["tool_calls"] == pytest.approx(__import__("math").log1p(2))
    assert {k: v for k, v in f.tools.items() if k.startswith("call:")} == {"call:read": 1.0, "call:write": 1.0}
    assert f.tool_names == {"read", "write"} and f.tools["task:note|write"] == 1.0  # what was asked x what was done
    assert f.numeric["answered"] == 1.0 and f.numeric["ungrounded_numbers"] > 0  # "2" is in no observation
    # a judge's note (with its pass/fail) in the metadata is not a feature
    t.metadata["judge"] = {"passed": True, "score": 1.0}
    assert featurize(t) == f
    errors = featurize(traj(read("colr", "error: no note", error=True), read("colr", "error: no note", error=True)))
    assert errors.numeric["error_rate"] == 1.0 and errors.numeric["last_call_error"] == 1.0
    assert errors.numeric["repeated_calls"] > 0 and errors.tools["error:read"] == 2.0


def test_train_reports_calibration_on_a_held_out_split(core_runs, verifier_file):
    report = json.loads(verifier_file.with_suffix(".json").read_text())
    counts = {}
    for name in TRAIN_RUNS:
        for r in read_run(core_runs[name])[0]:
            counts[r.status] = counts.get(r.status, 0) + 1
    assert report["class_balance"]["passed"] == counts["passed"] and report["class_balance"]["failed"] == counts["failed"]
    assert report["n"] == report["n_train"] + report["n_test"] == counts["passed"] + counts["failed"]
    assert 0.15 <= report["n_test"] / report["n"] <= 0.35
    # better than predicting the base rate, and informative
    assert 0.0 <= report["brier"] < report["brier_baseline"] <= 0.25
    assert report["roc_auc"] is not None and report["roc_auc"] > 0.75
    assert report["agreement"] > 0.7 and 0.0 <= report["ece"] <= 0.3
    assert report["mean_p_passed"] > report["mean_p_failed"]
    assert report["calibration"] in ("sigmoid", "isotonic") and report["folds"] >= 2


def test_the_file_round_trips_with_its_provenance(core_runs, verifier_file, tmp_path):
    v = load_verifier(verifier_file)
    prov = v.provenance
    assert prov["feature_version"] == FEATURE_VERSION and prov["label_source"] == "verdicts"
    import sklearn

    assert prov["sklearn_version"] == sklearn.__version__ and prov["created_at"].startswith("20")
    with zipfile.ZipFile(verifier_file) as zf:
        assert hashlib.sha256(zf.read("model.skops")).hexdigest() == prov["model_sha256"]
    for info in prov["runs"]:
        store = RunStore(__import__("pathlib").Path(info["run_dir"]))
        assert (info["run_id"], info["run_hash"]) == (store.get_meta("run_id"), store.get_meta("run_hash"))
        store.close()
    assert [r["run_dir"] for r in prov["runs"]] == [str(core_runs[n]) for n in TRAIN_RUNS]
    # the same predictions after a save / load
    trajectories = [r.trajectory for r in read_run(core_runs["fresh-sloppy"])[0]]
    before = v.predict(trajectories)
    v.save(tmp_path / "again.zip")
    after = load_verifier(tmp_path / "again.zip").predict(trajectories)
    assert [p.p_pass for p in before] == [p.p_pass for p in after]
    assert all(0.0 <= p.p_pass <= 1.0 for p in before)
    out = CliRunner().invoke(cli, ["judge", "verifier", str(verifier_file)])
    assert out.exit_code == 0 and f"feature version {FEATURE_VERSION}" in out.output
    assert prov["runs"][0]["run_id"] in out.output and "held out: agreement" in out.output


def test_labels_from_a_judge(core_runs, tmp_path, capsys):
    runs = [str(core_runs[n]) for n in TRAIN_RUNS]
    assert run_cli("judge", "train", *runs, "--labels", "judge:heuristic", "-o", str(tmp_path / "h.zip"),
                   "--json", str(tmp_path / "h.json")) == 0
    report = json.loads((tmp_path / "h.json").read_text())
    assert report["label_source"] == "judge:heuristic"
    assert load_verifier(tmp_path / "h.zip").provenance["label_source"] == "judge:heuristic"
    # a run whose own judge stored its scores
    for name, policy in (("judged-oracle", "oracle"), ("judged-noop", "noop")):
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(f"pack: core\npolicy: {policy}\njudge: heuristic\n", encoding="utf-8")
        assert run_cli("run", str(spec), "--run-dir", str(tmp_path / name), "-q") == 0
    assert run_cli("judge", "train", str(tmp_path / "judged-oracle"), str(tmp_path / "judged-noop"), "--labels", "judge",
                   "-o", str(tmp_path / "j.zip"), "--json", str(tmp_path / "j.json")) == 0
    stored = json.loads((tmp_path / "j.json").read_text())
    assert stored["label_source"] == "judge (stored scores)" and stored["class_balance"]["passed"] == 22
    # these runs had no judge: no stored scores to label with
    assert run_cli("judge", "train", *runs, "--labels", "judge", "-o", str(tmp_path / "s.zip")) == 2
    err = capsys.readouterr().err
    assert "no labelled episodes (judge)" in err and "no stored judge score" in err
    assert not (tmp_path / "s.zip").exists()


@pytest.mark.parametrize("problem", ["missing", "one_class", "bad_labels"])
def test_bad_training_input_is_a_clear_error(core_runs, tmp_path, capsys, problem):
    out = tmp_path / "v.zip"
    args = {
        "missing": [str(tmp_path / "no-such-run")],
        "one_class": [str(core_runs["oracle"])],
        "bad_labels": [str(core_runs["oracle"]), "--labels", "verdict"],
    }[problem]
    assert run_cli("judge", "train", *args, "-o", str(out)) == 2
    err = capsys.readouterr().err
    expected = {
        "missing": f"{tmp_path / 'no-such-run'}: not a run directory",
        "one_class": "all 22 labelled episodes are passed: a verifier needs passed and failed examples",
        "bad_labels": "--labels: expected 'verdicts', 'judge' or 'judge:NAME'",
    }[problem]
    assert expected in err and "Traceback" not in err
    assert not out.exists()


def test_too_few_examples_of_a_class():
    t = traj(write("color", "blue"), "done")
    examples = [Example(t, True)] * 10 + [Example(traj("no"), False)] * 2
    with pytest.raises(VerifierError, match=r"too few examples of one class \(10 passed, 2 failed\)"):
        train_verifier(examples, label_source="test")


def _rewrite(src, dst, provenance=None, model=None):
    with zipfile.ZipFile(src) as zf:
        prov = json.loads(zf.read("provenance.json"))
        blob = zf.read("model.skops")
    with zipfile.ZipFile(dst, "w") as zf:
        zf.writestr("provenance.json", json.dumps(provenance(prov) if provenance else prov))
        zf.writestr("model.skops", model(blob) if model else blob)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "tampered", "feature_version", "not_a_verifier", "newer"])
def test_a_damaged_or_foreign_verifier_file_is_refused(verifier_file, tmp_path, capsys, damage):
    bad = tmp_path / "bad.zip"
    if damage == "garbage":
        bad.write_bytes(b"\x00not a zip file at all")
    elif damage == "truncated":
        bad.write_bytes(verifier_file.read_bytes()[:500])
    elif damage == "tampered":  # another model under the recorded hash
        _rewrite(verifier_file, bad, model=lambda b: b[:-10] + b"0123456789")
    elif damage == "feature_version":
        _rewrite(verifier_file, bad, provenance=lambda p: {**p, "feature_version": FEATURE_VERSION + 1})
    elif damage == "newer":
        _rewrite(verifier_file, bad, provenance=lambda p: {**p, "format_version": 99})
    else:
        _rewrite(verifier_file, bad, provenance=lambda p: {**p, "format": "something-else"})
    expected = {
        "garbage": "not a verifier file made by 'agentsynth judge train'",
        "truncated": "not a verifier file made by 'agentsynth judge train'",
        "tampered": "does not match the recorded",
        "feature_version": f"feature_version: trained with feature version {FEATURE_VERSION + 1}",
        "not_a_verifier": "provenance.json: format: expected 'agentsynth-verifier'",
        "newer": "format_version: expected at most 1, got 99 (made by a newer agentsynth-judge)",
    }[damage]
    with pytest.raises(VerifierError, match="bad.zip") as info:
        load_verifier(bad)
    assert expected in str(info.value)
    assert run_cli("judge", "verifier", str(bad)) == 2
    assert expected in capsys.readouterr().err


def test_a_verifier_with_foreign_types_is_refused_before_loading(verifier_file, tmp_path):
    """skops refuses types a verifier is not made of, so a crafted file cannot run code on load."""
    import hashlib as h

    import skops.io as sio
    from sklearn.ensemble import RandomForestClassifier

    blob = sio.dumps({"model": RandomForestClassifier(n_estimators=1), "hook": __import__("collections").Counter()})
    bad = tmp_path / "foreign.zip"
    _rewrite(verifier_file, bad, provenance=lambda p: {**p, "model_sha256": h.sha256(blob).hexdigest()},
             model=lambda _b: blob)
    with pytest.raises(VerifierError, match="contains types a verifier is not made of: collections.Counter"):
        load_verifier(bad)


def test_without_scikit_learn_the_error_says_what_to_install(monkeypatch):
    import sys

    from agentsynth_judge.learned import _sklearn

    monkeypatch.setitem(sys.modules, "sklearn", None)  # as if it were not installed
    with pytest.raises(VerifierError, match=r"pip install 'agentsynth-judge\[learned\]'"):
        _sklearn()
