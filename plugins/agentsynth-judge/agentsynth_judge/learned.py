"""A learned verifier: a small calibrated classifier that predicts pass/fail from a trajectory.

It is trained on episodes labelled by the world's verdicts or by a judge, and used to *route*
(:mod:`agentsynth_judge.routing`): confident passes are accepted, confident fails dropped, and
only the borderline band goes to the real (slow, paid) judge.

Features come from the trajectory alone (:func:`featurize`), never from the verdicts, the status
or the scores stored with it (nor the judge's notes in ``metadata["judge"]``): counts of steps,
tool calls, invalid calls and error observations, repeated calls, the answer's length, numbers
and claims, which tools were called, and the final answer's words through a hashing vectorizer
(no vocabulary to store, the same vector for the same text everywhere). A change to any of that
bumps :data:`FEATURE_VERSION`; a verifier trained with another version is refused on load.

The classifier is a logistic regression (balanced classes) calibrated by cross-validation
(``CalibratedClassifierCV``: isotonic from 50 training examples of each class, else Platt's sigmoid), evaluated on a
stratified held-out split (Brier score, agreement, ROC AUC, expected calibration error).

A verifier file is a zip of ``provenance.json`` (training runs and their run hashes, label source,
feature version, library versions, date, the model's sha256, the report) and ``model.skops``: the
model in the skops format, which loads without running pickled code, and only the scikit-learn
types a verifier is made of are trusted. A file whose model does not match its recorded hash, or
that is not a verifier at all, is refused with the file's name.

Out of its training distribution a verifier's confidence means little (a trajectory that games
the features: a long confident answer without a single tool call). :meth:`Verifier.novelty` says
why an item is unlike anything the verifier was trained on (a feature outside the training range,
a tool never seen, a combination far from every training example, an answer in mostly unseen
words), and routing sends such items to the judge instead of trusting the probability. It also
accepts only what lies within the feature ranges of the training *passes* (an answer with no tool
call is unlike every pass when every pass called a tool, whatever its words), and drops only what
lies within those of the training fails.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import hashlib
import json
import math
import platform
import re
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import AgentsynthError, ToolCall, Trajectory

from .heuristic import _ADMIT_RE, _CLAIM_RE, _NUMBER_RE

FEATURE_VERSION = 1
FORMAT = "agentsynth-verifier"
FORMAT_VERSION = 1
TEXT_FEATURES = 2**10
TOOL_FEATURES = 2**10

# name -> log1p-transformed (counts) or as is (rates and flags)
NUMERIC: dict[str, bool] = {
    "steps": True,
    "tool_calls": True,
    "invalid_calls": True,
    "error_observations": True,
    "error_rate": False,
    "distinct_tools": True,
    "repeated_calls": True,
    "calls_after_last_error": True,
    "last_call_error": False,
    "observation_chars": True,
    "turns": True,
    "answered": False,
    "answer_chars": True,
    "answer_words": True,
    "answer_numbers": True,
    "ungrounded_numbers": True,
    "claims_success": False,
    "admits_failure": False,
    "stopped": False,
    "tools_offered": True,
}

# what a verifier file may contain beyond skops' default-trusted types (all made by `judge train`)
TRUSTED_TYPES = ("sklearn.calibration._CalibratedClassifier", "sklearn.calibration._SigmoidCalibration",
                 "sklearn.model_selection._split.StratifiedKFold")

_WORD_RE = re.compile(r"\w+")


class VerifierError(AgentsynthError):
    """A verifier cannot be trained (too few labels, one class) or loaded (corrupt, other version)."""

    agentsynth_error_kind = "verifier"


def _sklearn() -> Any:
    try:
        import sklearn
    except ImportError:
        raise VerifierError("the learned verifier needs scikit-learn and skops: "
                            "pip install 'agentsynth-judge[learned]'") from None
    return sklearn


# --- features ---------------------------------------------------------------------------------------


@attrs.frozen
class Features:
    """What the verifier sees of one trajectory (nothing of its verdicts)."""

    numeric: dict[str, float]
    tools: dict[str, float]
    answer: str
    tool_names: frozenset[str]


def featurize(trajectory: Trajectory) -> Features:
    """The features of one trajectory: counts from its steps and its final answer's text."""
    raw: dict[str, float] = {}
    calls = [s for s in trajectory.steps if isinstance(s.action, ToolCall)]
    errors = [s for s in calls if s.observation is not None and s.observation.error]
    seen: set[str] = set()
    repeated = 0
    tools: dict[str, float] = {}
    since_error = 0
    for s in calls:
        action = s.action
        assert isinstance(action, ToolCall)
        key = action.name + json.dumps(action.arguments, sort_keys=True, default=str)
        repeated += key in seen
        seen.add(key)
        tools[f"call:{action.name}"] = tools.get(f"call:{action.name}", 0.0) + 1.0
        failed = s.observation is not None and s.observation.error
        if failed:
            tools[f"error:{action.name}"] = tools.get(f"error:{action.name}", 0.0) + 1.0
            since_error = 0
        else:
            since_error += 1
        if s.invalid:
            tools[f"invalid:{action.name}"] = tools.get(f"invalid:{action.name}", 0.0) + 1.0
    answer = trajectory.final_answer or ""
    evidence = " ".join([trajectory.instruction, trajectory.initial_observation,
                         *(s.observation.content for s in trajectory.steps if s.observation is not None),
                         *(json.dumps(s.action.arguments, default=str) for s in calls
                           if isinstance(s.action, ToolCall))])
    numbers = [m.group(0) for m in _NUMBER_RE.finditer(answer)]
    admits = bool(_ADMIT_RE.search(answer))
    raw.update(
        steps=len(trajectory.steps),
        tool_calls=len(calls),
        invalid_calls=sum(1 for s in trajectory.steps if s.invalid),
        error_observations=len(errors),
        error_rate=len(errors) / len(calls) if calls else 0.0,
        distinct_tools=len({s.action.name for s in calls if isinstance(s.action, ToolCall)}),
        repeated_calls=repeated,
        calls_after_last_error=since_error if errors else 0,
        last_call_error=float(bool(calls) and calls[-1] in errors),
        observation_chars=sum(len(s.observation.content) for s in trajectory.steps if s.observation is not None),
        turns=len({s.turn for s in trajectory.steps}),
        answered=float(bool(answer.strip())),
        answer_chars=len(answer),
        answer_words=len(_WORD_RE.findall(answer)),
        answer_numbers=len(numbers),
        ungrounded_numbers=sum(1 for n in numbers if n not in evidence),
        claims_success=float(bool(_CLAIM_RE.search(answer)) and not admits),
        admits_failure=float(admits),
        stopped=float(bool(trajectory.metadata.get("stopped"))),
        tools_offered=len(trajectory.tools),
    )
    numeric = {name: (math.log1p(raw[name]) if logged else float(raw[name])) for name, logged in NUMERIC.items()}
    names = frozenset(s.action.name for s in calls if isinstance(s.action, ToolCall))
    # what the task asks x what was done: lets a linear model learn "a task that says 'refund' passes
    # when the write tool was called" (which tools write is nowhere declared)
    words = sorted({w for w in _WORD_RE.findall(trajectory.instruction.lower()) if len(w) > 3 and not w.isdigit()})
    for w in words[:40]:
        for name in sorted(names) or ["(none)"]:
            tools[f"task:{w}|{name}"] = 1.0
    return Features(numeric, tools, answer, names)


def _vectorizers() -> tuple[Any, Any]:
    from sklearn.feature_extraction import FeatureHasher
    from sklearn.feature_extraction.text import HashingVectorizer

    text = HashingVectorizer(n_features=TEXT_FEATURES, ngram_range=(1, 2), alternate_sign=False, norm="l2")
    tools = FeatureHasher(n_features=TOOL_FEATURES, input_type="dict", alternate_sign=False)
    return text, tools


def matrix(features: Sequence[Features]) -> Any:
    """The sparse design matrix: numeric features, the hashed tool bag, the hashed answer text."""
    import numpy as np
    from scipy import sparse

    text, tools = _vectorizers()
    numeric = np.array([[f.numeric[n] for n in NUMERIC] for f in features], dtype=float).reshape(len(features),
                                                                                                len(NUMERIC))
    parts = [sparse.csr_matrix(numeric), tools.transform([f.tools for f in features]),
             text.transform([f.answer for f in features])]
    return sparse.hstack(parts, format="csr")


# --- the verifier -----------------------------------------------------------------------------------


@attrs.define
class Prediction:
    p_pass: float
    novelty: list[str]  # why the item is out of the training distribution (empty: in distribution)
    unlike_passed: list[str] = attrs.field(factory=list)  # why it looks like no passed training example
    unlike_failed: list[str] = attrs.field(factory=list)  # ... like no failed one


@attrs.define
class Verifier:
    """A trained verifier: the calibrated model, what its training data looked like, its provenance."""

    model: Any
    provenance: dict[str, Any]
    reference: Any  # z-scored numeric features of (up to 2000) training examples
    mean: Any
    std: Any
    low: Any  # per numeric feature, the training range widened by a margin
    high: Any
    support: Any  # [failed, passed] x [low, high] per numeric feature: each class's range, widened
    nn_limit: float  # distance to the nearest training example beyond which an item is novel
    seen_words: Any  # bool per text bucket: some training answer used it
    tool_names: frozenset[str]
    path: Path | None = None

    @property
    def id(self) -> str:
        return "sha256:" + str(self.provenance.get("model_sha256", ""))[:16]

    def predict(self, trajectories: Sequence[Trajectory]) -> list[Prediction]:
        """Calibrated P(pass) and the novelty reasons for each trajectory."""
        if not trajectories:
            return []
        feats = [featurize(t) for t in trajectories]
        probs = self.model.predict_proba(matrix(feats))[:, 1]
        return [Prediction(round(float(p), 6), self.novelty(f), self.unlike(f, True), self.unlike(f, False))
                for p, f in zip(probs, feats, strict=True)]

    def unlike(self, f: Features, passed: bool) -> list[str]:
        """Why ``f`` is outside the feature ranges of the training examples that passed (or failed): a
        verifier accepts only what looks like a training pass, and drops only what looks like a fail."""
        import numpy as np

        low, high = self.support[int(passed)]
        what = "passed" if passed else "failed"
        return _outside(np.array([f.numeric[n] for n in NUMERIC], dtype=float), low, high,
                        f"the {what} training episodes'")

    def novelty(self, f: Features) -> list[str]:
        """Why ``f`` is unlike the training data (empty when it is not)."""
        import numpy as np

        values = np.array([f.numeric[n] for n in NUMERIC], dtype=float)
        reasons = _outside(values, self.low, self.high, "the training")
        unseen = sorted(f.tool_names - self.tool_names)
        if unseen:
            reasons.append(f"calls tool(s) never seen in training: {', '.join(unseen)}")
        z = (values - self.mean) / self.std
        nearest = float(np.sqrt(((self.reference - z) ** 2).sum(axis=1)).min()) if len(self.reference) else 0.0
        if nearest > self.nn_limit:
            reasons.append(f"far from every training example (distance {nearest:.2f} > {self.nn_limit:.2f})")
        text, _ = _vectorizers()
        buckets = text.transform([f.answer]).nonzero()[1]
        if len(buckets) >= 8:
            new = float((~self.seen_words[buckets]).mean())
            if new > 0.5:
                reasons.append(f"answer in mostly unseen words ({new:.0%} of its word n-grams)")
        return reasons

    # --- file format --------------------------------------------------------------------------------

    def save(self, path: Path) -> None:
        import skops.io as sio

        payload = {"model": self.model, "reference": self.reference, "mean": self.mean, "std": self.std,
                   "low": self.low, "high": self.high, "support": self.support, "seen_words": self.seen_words}
        blob = sio.dumps(payload)
        self.provenance["model_sha256"] = hashlib.sha256(blob).hexdigest()
        self.provenance["nn_limit"] = self.nn_limit
        self.provenance["tool_names"] = sorted(self.tool_names)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("provenance.json", json.dumps(self.provenance, indent=2, default=str))
            zf.writestr("model.skops", blob)
        tmp.replace(path)
        self.path = path


def _outside(values: Any, low: Any, high: Any, what: str) -> list[str]:
    reasons = []
    for i, (name, logged) in enumerate(NUMERIC.items()):
        if values[i] > high[i] or values[i] < low[i]:
            shown, lo, hi = ((math.expm1(x) for x in (values[i], low[i], high[i])) if logged
                             else (values[i], low[i], high[i]))
            reasons.append(f"{name} {shown:.3g} outside {what} range [{max(lo, 0):.3g}, {hi:.3g}]")
    return reasons


def read_provenance(path: Path) -> tuple[dict[str, Any], bytes]:
    """The provenance and model bytes of a verifier file, checked (format, feature version, hash)."""
    path = Path(path)
    if not path.is_file():
        raise VerifierError(f"{path}: no such verifier file")
    try:
        with zipfile.ZipFile(path) as zf:
            prov = json.loads(zf.read("provenance.json"))
            blob = zf.read("model.skops")
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise VerifierError(f"{path}: not a verifier file made by 'agentsynth judge train' ({exc})") from None
    if not isinstance(prov, dict) or prov.get("format") != FORMAT:
        raise VerifierError(f"{path}: provenance.json: format: expected {FORMAT!r}")
    if not isinstance(prov.get("format_version"), int) or prov["format_version"] > FORMAT_VERSION:
        raise VerifierError(f"{path}: provenance.json: format_version: expected at most {FORMAT_VERSION}, got "
                            f"{prov.get('format_version')!r} (made by a newer agentsynth-judge)")
    if prov.get("feature_version") != FEATURE_VERSION:
        raise VerifierError(
            f"{path}: provenance.json: feature_version: trained with feature version {prov.get('feature_version')!r}, "
            f"this agentsynth-judge computes version {FEATURE_VERSION}; train it again with 'agentsynth judge train'")
    digest = hashlib.sha256(blob).hexdigest()
    if prov.get("model_sha256") != digest:
        raise VerifierError(f"{path}: model.skops: content hash sha256:{digest[:16]} does not match the recorded "
                            f"sha256:{str(prov.get('model_sha256'))[:16]} (the file is corrupt or was altered)")
    return prov, blob


def load_verifier(path: Path) -> Verifier:
    """Load a verifier file; every problem is a :class:`VerifierError` naming the file."""
    _sklearn()
    import numpy as np
    import skops.io as sio

    prov, blob = read_provenance(path)
    try:
        untrusted = sio.get_untrusted_types(data=blob)
        extra = sorted(set(untrusted) - set(TRUSTED_TYPES))
        if extra:
            raise VerifierError(f"{path}: model.skops: contains types a verifier is not made of: {', '.join(extra)}")
        payload = sio.loads(blob, trusted=list(untrusted))
    except VerifierError:
        raise
    except Exception as exc:  # skops raises many kinds on a damaged file
        raise VerifierError(f"{path}: model.skops: cannot be loaded ({type(exc).__name__}: {exc})") from None
    if prov.get("sklearn_version") != _sklearn().__version__:
        prov.setdefault("warnings", []).append(
            f"trained with scikit-learn {prov.get('sklearn_version')}, loaded with {_sklearn().__version__}")
    return Verifier(payload["model"], prov, np.asarray(payload["reference"]), np.asarray(payload["mean"]),
                    np.asarray(payload["std"]), np.asarray(payload["low"]), np.asarray(payload["high"]),
                    np.asarray(payload["support"]),
                    float(prov["nn_limit"]), np.asarray(payload["seen_words"], dtype=bool),
                    frozenset(prov.get("tool_names") or ()), Path(path))


# --- training ---------------------------------------------------------------------------------------


@attrs.define
class Example:
    """One labelled trajectory (where it came from, for the report)."""

    trajectory: Trajectory
    label: bool
    task_id: str = ""
    trial: int = 0
    run: str = ""


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), digits)


def calibration_error(probs: Sequence[float], labels: Sequence[bool], bins: int = 10) -> float:
    """Expected calibration error: the gap between predicted and observed pass rates, weighted by bin size."""
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        idx = [i for i, p in enumerate(probs) if lo <= p < hi or (b == bins - 1 and p == 1.0)]
        if idx:
            total += len(idx) * abs(sum(probs[i] for i in idx) / len(idx) - sum(labels[i] for i in idx) / len(idx))
    return total / len(probs) if probs else 0.0


def train_verifier(
    examples: Sequence[Example],
    *,
    label_source: str,
    runs: Sequence[Mapping[str, Any]] = (),
    test_size: float = 0.25,
    seed: int = 0,
    calibration: str = "auto",
    label_threshold: float | None = None,
) -> tuple[Verifier, dict[str, Any]]:
    """Fit a calibrated verifier on ``examples``; returns it and its held-out report."""
    sklearn = _sklearn()
    import numpy as np
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MaxAbsScaler

    labels = np.array([bool(e.label) for e in examples])
    n_pass, n_fail = int(labels.sum()), int((~labels).sum())
    if not examples:
        raise VerifierError("no labelled episodes to train on")
    if min(n_pass, n_fail) == 0:
        only = "passed" if n_fail == 0 else "failed"
        raise VerifierError(f"all {len(examples)} labelled episodes are {only}: a verifier needs passed and failed "
                            "examples (add a run of a weaker or a stronger policy)")
    if min(n_pass, n_fail) < 4:
        raise VerifierError(f"too few examples of one class ({n_pass} passed, {n_fail} failed): need at least 4 of each "
                            "for a calibrated model and a held-out split")
    feats = [featurize(e.trajectory) for e in examples]
    X = matrix(feats)
    # identical trajectories (a deterministic policy's trials) stay on one side of the split
    groups = [hashlib.sha1(_signature(e.trajectory).encode()).hexdigest() for e in examples]
    splitter = StratifiedGroupKFold(n_splits=max(2, round(1 / test_size)), shuffle=True, random_state=seed)
    train_idx, test_idx = next(splitter.split(np.zeros(len(examples)), labels, groups))
    y_train = labels[train_idx]
    if min(int(y_train.sum()), int((~y_train).sum())) < 2 or not len(test_idx):
        raise VerifierError(f"too few distinct trajectories of one class ({n_pass} passed, {n_fail} failed, "
                            f"{len(set(groups))} distinct) for a calibrated model and a held-out split")
    y_test = labels[test_idx]
    # isotonic needs enough points per class; Platt's sigmoid cannot get near 0 or 1 on few points
    method = calibration if calibration != "auto" else (
        "isotonic" if min(int(y_train.sum()), int((~y_train).sum())) >= 50 else "sigmoid")
    folds = int(min(3, y_train.sum(), (~y_train).sum()))  # few large calibration folds: Platt needs the points
    base = Pipeline([("scale", MaxAbsScaler()),
                     ("clf", LogisticRegression(C=1.0, max_iter=2000, class_weight="balanced"))])
    model = CalibratedClassifierCV(base, method=method, cv=StratifiedKFold(folds, shuffle=True, random_state=seed))
    model.fit(X[train_idx], y_train)
    probs = model.predict_proba(X[test_idx])[:, 1]
    both = bool(y_test.any() and (~y_test).any())
    report: dict[str, Any] = {
        "label_source": label_source,
        "n": len(examples), "n_train": len(train_idx), "n_test": len(test_idx), "n_distinct": len(set(groups)),
        "class_balance": {"passed": n_pass, "failed": n_fail, "pass_rate": _round(n_pass / len(examples)),
                          "train_pass_rate": _round(float(y_train.mean())),
                          "test_pass_rate": _round(float(y_test.mean()))},
        "calibration": method, "folds": folds,
        "brier": _round(brier_score_loss(y_test, probs)),
        "brier_baseline": _round(brier_score_loss(y_test, np.full(len(y_test), y_train.mean()))),
        "log_loss": _round(log_loss(y_test, probs, labels=[False, True])),
        "agreement": _round(float(((probs >= 0.5) == y_test).mean())),
        "roc_auc": _round(roc_auc_score(y_test, probs)) if both else None,
        "ece": _round(calibration_error(list(map(float, probs)), list(map(bool, y_test)))),
        "mean_p_passed": _round(float(probs[y_test].mean())) if y_test.any() else None,
        "mean_p_failed": _round(float(probs[~y_test].mean())) if (~y_test).any() else None,
    }
    # what the training data looks like, to tell an out-of-distribution item later
    numeric = np.array([[f.numeric[n] for n in NUMERIC] for f in (feats[i] for i in train_idx)], dtype=float)
    lo, hi = numeric.min(axis=0), numeric.max(axis=0)
    margin = 0.1 * (hi - lo) + 0.05
    support = np.zeros((2, 2, len(NUMERIC)))
    for cls in (0, 1):
        rows = numeric[y_train == bool(cls)]
        c_lo, c_hi = rows.min(axis=0), rows.max(axis=0)
        c_margin = 0.1 * (c_hi - c_lo) + 0.05
        support[cls] = (c_lo - c_margin, c_hi + c_margin)
    mean, std = numeric.mean(axis=0), np.maximum(numeric.std(axis=0), 0.1)
    z = (numeric - mean) / std
    rng = np.random.default_rng(seed)
    reference = z[rng.choice(len(z), 2000, replace=False)] if len(z) > 2000 else z
    nn_limit = _nn_limit(reference)
    text, _ = _vectorizers()
    seen_words = np.asarray(text.transform([feats[i].answer for i in train_idx]).sum(axis=0)).ravel() > 0
    tool_names = frozenset(name for i in train_idx for name in feats[i].tool_names)
    provenance: dict[str, Any] = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "feature_version": FEATURE_VERSION,
        "features": {"numeric": list(NUMERIC), "tool_buckets": TOOL_FEATURES, "text_buckets": TEXT_FEATURES,
                     "text": "final answer, word 1-2 grams, hashed"},
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "label_source": label_source, "label_threshold": label_threshold,
        "runs": [dict(r) for r in runs], "seed": seed, "test_size": test_size,
        "model": "logistic regression (balanced), MaxAbsScaler, CalibratedClassifierCV",
        "sklearn_version": sklearn.__version__, "numpy_version": np.__version__,
        "python": platform.python_version(), "agentsynth_judge_version": _plugin_version(),
        "report": report,
    }
    return Verifier(model, provenance, reference, mean, std, lo - margin, hi + margin, support, nn_limit,
                    seen_words, tool_names), report


def _signature(t: Trajectory) -> str:
    """What makes two trajectories the same for the split: the task, the actions and the answer."""
    return json.dumps([t.instruction] + [[s.action.name, s.action.arguments] if isinstance(s.action, ToolCall) else None
                       for s in t.steps] + [t.final_answer], sort_keys=True, default=str)


def _nn_limit(reference: Any) -> float:
    """1.5 x the 99th percentile of leave-one-out nearest-neighbour distances of the training set (+ a floor)."""
    import numpy as np

    if len(reference) < 2:
        return 1.0
    sq = (reference**2).sum(axis=1)
    d = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * reference @ reference.T, 0.0))  # at most 2000 x 2000
    np.fill_diagonal(d, np.inf)
    nearest = d.min(axis=1)
    return float(1.5 * np.quantile(nearest, 0.99) + 0.5)


def _plugin_version() -> str:
    from . import __version__

    return __version__


def describe(prov: Mapping[str, Any]) -> str:
    """A verifier's provenance in a few lines (for ``agentsynth judge verifier``)."""
    rep = prov.get("report") or {}
    runs = ", ".join(f"{r.get('run_dir')} ({r.get('run_id')}, {str(r.get('run_hash', ''))[:19]})"
                     for r in prov.get("runs") or []) or "n/a"
    return "\n".join([
        f"verifier sha256:{str(prov.get('model_sha256'))[:16]} · feature version {prov.get('feature_version')} · "
        f"trained {prov.get('created_at')}",
        f"  labels: {prov.get('label_source')} · {rep.get('n')} episodes ({rep.get('n_train')} train, "
        f"{rep.get('n_test')} held out) · scikit-learn {prov.get('sklearn_version')}",
        f"  runs: {runs}",
    ])


def report_lines(report: Mapping[str, Any]) -> list[str]:
    """The training report for the terminal."""
    bal = report["class_balance"]

    def f(x: Any) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    return [
        f"  {report['n']} labelled episodes ({bal['passed']} passed, {bal['failed']} failed): "
        f"{report['n_train']} train, {report['n_test']} held out",
        f"  held out: agreement {f(report['agreement'])}   ROC AUC {f(report['roc_auc'])}   "
        f"Brier {f(report['brier'])} (predicting the base rate: {f(report['brier_baseline'])})   ECE {f(report['ece'])}",
        f"  calibration {report['calibration']} ({report['folds']}-fold)   mean P(pass): passed {f(report['mean_p_passed'])}, "
        f"failed {f(report['mean_p_failed'])}",
    ]


# --- labels -----------------------------------------------------------------------------------------


def run_info(run_dir: Path) -> dict[str, Any]:
    """Who a run is (its id, run hash, pack), for a verifier's provenance."""
    from agentsynth_kernel import STORE_FILE, RunStore

    run_dir = Path(run_dir)
    if not (run_dir / STORE_FILE).is_file():
        raise VerifierError(f"{run_dir}: not a run directory (no {STORE_FILE})")
    store = RunStore(run_dir, create=False)
    try:
        pack = store.get_meta("pack") or {}
        return {"run_dir": str(run_dir), "run_id": store.get_meta("run_id"), "run_hash": store.get_meta("run_hash"),
                "pack": pack.get("id") if isinstance(pack, dict) else None}
    finally:
        store.close()


def parse_labels(value: str) -> tuple[str, str | None]:
    """``verdicts`` | ``judge`` (the run's stored judge scores) | ``judge:SPEC`` (a judge type or YAML file)."""
    kind, _, spec = value.partition(":")
    if kind not in ("verdicts", "judge") or (kind == "verdicts" and spec) or (_ and not spec):
        raise VerifierError(f"--labels: expected 'verdicts', 'judge' or 'judge:NAME' (a judge type or a YAML file), "
                            f"got {value!r}")
    return kind, spec or None


async def label_examples(
    results: Sequence[tuple[str, Any]],
    kind: str,
    judge: Any = None,
    *,
    threshold: float | None = None,
    with_verdicts: bool = False,
    concurrency: int = 8,
) -> tuple[list[Example], dict[str, int]]:
    """Labelled examples from ``(run_dir, EpisodeResult)`` pairs, and how many were skipped and why.

    ``verdicts``: passed / failed (an episode in error has no verdict). ``judge`` with ``judge=None``:
    the scores the run's judge stored (``judge.passed``, or ``judge`` >= ``threshold``). With a
    ``judge``: that judge scores each trajectory (blind unless ``with_verdicts``); an error skips it.
    """
    from agentsynth_kernel import call

    from .base import METADATA_KEY

    skipped: dict[str, int] = {}
    gate = asyncio.Semaphore(max(1, concurrency))

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    async def one(run_dir: str, r: Any) -> Example | None:
        if r.trajectory is None:
            skip("no trajectory")
            return None
        label: bool | None = None
        if kind == "verdicts":
            if r.status not in ("passed", "failed"):
                skip(f"status {r.status}")
                return None
            label = r.status == "passed"
        elif judge is None:
            if "judge" not in r.scores:
                skip("no stored judge score")
                return None
            score = float(r.scores["judge"])
            if threshold is not None:
                label = score >= threshold
            else:
                label = r.scores["judge.passed"] >= 0.5 if "judge.passed" in r.scores else score >= 0.7
        else:
            r.trajectory.metadata.pop(METADATA_KEY, None)
            async with gate:
                try:
                    res = await call(judge.score, r.trajectory, list(r.verdicts) if with_verdicts else [])
                except Exception as exc:  # one bad reply skips one example
                    skip(f"judge error ({type(exc).__name__})")
                    return None
            label = (float(res.score) >= threshold if threshold is not None
                     else bool(res.passed) if res.passed is not None else float(res.score) >= 0.7)
        return Example(r.trajectory, bool(label), r.task_id, r.trial, run_dir)

    made = await asyncio.gather(*(one(run_dir, r) for run_dir, r in results))
    return [e for e in made if e is not None], skipped
