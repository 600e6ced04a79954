"""``agentsynth export ... --push-to-hub REPO``: the export as a Hugging Face Hub dataset, with a card.

One commit through ``huggingface_hub`` (``HfApi.create_repo`` then ``HfApi.create_commit``, the
call ``upload_file`` / ``upload_folder`` make: preupload, then commit) holds the data files under
``data/`` and a generated ``README.md``: pack, split, policy, verification stats from the run
store, provenance, the licence field and the pack's canary string. The token comes from
``HF_TOKEN`` only and is never written anywhere; ``HF_ENDPOINT`` selects another Hub.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from agentsynth_kernel import AgentsynthError

REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
LICENSE_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]{0,63}$")


def _yaml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid YAML scalar


def run_facts(run_dir: Path) -> dict[str, Any]:
    """What the card states about the run: its meta and the verdict counts of every stored episode."""
    from agentsynth_kernel import RunStore

    store = RunStore(run_dir, create=False)
    try:
        meta = {key: store.get_meta(key) for key in ("run_id", "run_hash", "spec", "pack", "versions", "import")}
        counts: dict[str, int] = {}
        for (status, _kind), n in store.counts().items():
            counts[status] = counts.get(status, 0) + n
    finally:
        store.close()
    meta["counts"] = {s: counts.get(s, 0) for s in ("passed", "failed", "error", "unverified")}
    return meta


def data_pattern(files: list[str]) -> str:
    """The card's ``data_files`` pattern: the data files only (a saved dataset's .arrow shards, not its
    json state files), so the Hub's loader sees one format."""
    arrow = [f for f in files if f.endswith(".arrow")]
    if arrow:
        return "data/**/*.arrow"
    suffixes = {Path(f).suffix for f in files}
    return f"data/*{suffixes.pop()}" if len(suffixes) == 1 else "data/*"


def dataset_card(repo: str, *, fmt: str, files: list[str], facts: dict[str, Any], summary: dict[str, Any],
                 license_id: str, canary: str) -> str:
    spec = facts.get("spec") or {}
    pack = facts.get("pack") or {}
    policy = spec.get("policy") or {}
    counts = facts["counts"]
    checked = counts["passed"] + counts["failed"]
    split = spec.get("split", "") or "-"
    included_test = bool(summary.get("include_test"))
    policy_text = str(policy.get("type", "-")) + (f" ({policy['model']})" if policy.get("model") else "")
    stats = {k: v for k, v in summary.items() if isinstance(v, int) and not isinstance(v, bool)}
    versions = facts.get("versions") or {}
    lines = [
        "---",
        f"license: {license_id}",
        f"pretty_name: {_yaml_str(repo.split('/')[1])}",
        "tags:",
        "- agentsynth",
        "- agent-trajectories",
        "- tool-use",
        "- outcome-verified",
        "configs:",
        "- config_name: default",
        "  data_files:",
        "  - split: train",
        f"    path: {_yaml_str(data_pattern(files))}",
        "agentsynth:",
        f"  pack: {_yaml_str(str(pack.get('id', '')))}",
        f"  pack_hash: {_yaml_str(str(pack.get('content_hash', '')))}",
        f"  split: {_yaml_str(split)}",
        f"  policy: {_yaml_str(policy_text)}",
        f"  format: {_yaml_str(fmt)}",
        f"  run_id: {_yaml_str(str(facts.get('run_id') or ''))}",
        f"  run_hash: {_yaml_str(str(facts.get('run_hash') or ''))}",
        f"  records: {int(summary.get('written', 0))}",
        f"  episodes_passed: {counts['passed']}",
        f"  episodes_failed: {counts['failed']}",
        f"  episodes_error: {counts['error']}",
        f"  canary: {_yaml_str(canary)}",
        "---",
        "",
        f"# {repo}",
        "",
        f"Agent trajectories exported by agentsynth-export (format `{fmt}`) from a run of the pack"
        f" `{pack.get('id', '?')}`. Every episode was played in a real, seeded world and its outcome decided by"
        " checkers reading the world's end state, not by what the agent said.",
        "",
        "## Provenance",
        "",
        f"- pack: `{pack.get('id', '?')}`, content hash `{pack.get('content_hash', '?')}`",
        f"- split run: `{split}`; test-split records {'included' if included_test else 'left out'}",
        f"- policy: `{policy_text}`",
        f"- run: `{facts.get('run_id') or '?'}`, run hash `{facts.get('run_hash') or '?'}`",
        "- versions: " + (", ".join(f"{k} {v}" for k, v in sorted(versions.items())) or "-"),
        f"- files: {', '.join(f'`{f}`' for f in files)}",
        "",
        "## Verification stats",
        "",
        f"- episodes in the run: {sum(counts.values())}; checked on the world's end state: {checked}"
        f" ({counts['passed']} passed, {counts['failed']} failed); ended in an error: {counts['error']};"
        f" imported unverified: {counts['unverified']}",
        f"- pass rate: {counts['passed'] / checked:.1%}" if checked else "- pass rate: - (nothing checked)",
        "- export selection: " + (", ".join(f"{k}={v}" for k, v in stats.items()) or "-"),
        "- re-verify: `agentsynth verify RUN_DIR` replays the stored tool calls in fresh worlds",
        "",
        "## Licence",
        "",
        f"`{license_id}`" + (" (not stated: set one with --hub-license)" if license_id == "unknown" else ""),
        "",
        "## Canary",
        "",
        "If this string shows up in a model's training data or output, this dataset leaked into it:",
        "",
        f"    {canary}",
        "",
    ]
    return "\n".join(lines)


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Connection errors of the HTTP client huggingface_hub uses (httpx, or its fork httpx2 in 2.x)."""
    import importlib

    out = []
    for name in ("httpx", "httpx2"):
        try:
            out.append(importlib.import_module(name).HTTPError)
        except (ImportError, AttributeError):
            pass
    return tuple(out)


def check_push(repo: str, license_id: str | None) -> str:
    """Refuse a bad repo id, licence or a missing token before anything is exported; the token."""
    if not REPO_RE.match(repo):
        raise AgentsynthError(f"--push-to-hub: {repo!r} is not a repo id (expected NAMESPACE/NAME)")
    if license_id is not None and not LICENSE_RE.match(license_id):
        raise AgentsynthError(f"--hub-license: {license_id!r} is not a licence identifier (e.g. apache-2.0, cc-by-4.0)")
    token = os.environ.get("HF_TOKEN", "").strip()
    if not token:
        raise AgentsynthError("--push-to-hub: HF_TOKEN is not set (a Hugging Face token with write access;"
                              " it is read from the environment only and never written)")
    return token


def push_to_hub(repo: str, *, output: Path, fmt: str, run_dir: Path, summary: dict[str, Any],
                license_id: str | None = None, private: bool = False) -> dict[str, Any]:
    """Create (or reuse) dataset repo ``repo`` and commit the export and its card in one commit."""
    from .common import _canary

    token = check_push(repo, license_id)
    license_id = license_id or "unknown"
    import huggingface_hub
    from huggingface_hub import CommitOperationAdd, HfApi

    if huggingface_hub.constants.HF_HUB_OFFLINE:
        raise AgentsynthError("--push-to-hub: HF_HUB_OFFLINE is set; unset it to push")
    if output.is_dir():
        files = sorted(p for p in output.rglob("*") if p.is_file())
        pairs = [(p, f"data/{p.relative_to(output).as_posix()}") for p in files]
    else:
        pairs = [(output, f"data/{output.name}")]
    facts = run_facts(run_dir)
    pack = facts.get("pack") or {}
    canary = _canary(str(pack.get("content_hash") or pack.get("id") or "agentsynth"))
    card = dataset_card(repo, fmt=fmt, files=[p for _, p in pairs], facts=facts, summary=summary,
                        license_id=license_id, canary=canary)
    api = HfApi(token=token)
    try:
        url = api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
        operations = [CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=card.encode())]
        operations += [CommitOperationAdd(path_in_repo=dest, path_or_fileobj=str(src)) for src, dest in pairs]
        commit = api.create_commit(repo, operations, repo_type="dataset",
                                   commit_message=f"agentsynth export ({fmt}, {summary.get('written', 0)} records)")
    except (huggingface_hub.errors.HfHubHTTPError, *_transport_errors(), ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AgentsynthError(f"--push-to-hub {repo}: {first}") from None
    return {"repo": repo, "url": str(url), "commit": commit.oid, "files": ["README.md", *(p for _, p in pairs)],
            "canary": canary, "license": license_id}
