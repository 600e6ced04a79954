"""Talking to a hub from the client side: submit a run, fetch a pack.

``submit_run`` and ``resolve_remote_pack`` have the signatures of the kernel hooks requested for
``agentsynth bench --submit URL`` and ``--hub URL`` (see the plugin's README): once the kernel has
those hookspecs, ``plugin.py`` registers them as they are.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

from agentsynth_kernel import AgentsynthError

CACHE = Path.home() / ".cache" / "agentsynth" / "hub-packs"


def submit_run(run_dir: Path, url: str, label: str = "") -> dict[str, Any]:
    """Submit ``run_dir`` to the hub at ``url`` (token from AGENTSYNTH_HUB_TOKEN): ``accepted``, a
    one-line ``message`` and the hub's whole ``answer``."""
    from .client import build_submission, encode, post, token_from_env

    status, answer = post(url, encode(build_submission(Path(run_dir), label=label)), token=token_from_env())
    if status == 201:
        tied = " (statistically tied)" if answer.get("tied") else ""
        low, high = answer["ci95"]
        message = (f"accepted as submission #{answer['submission']}: rank {answer['rank']}{tied}, pass rate"
                   f" {answer['pass_rate']:.1%} (95% CI {low:.1%}-{high:.1%}), {answer['replayed']} episode(s)"
                   f" replayed\n{answer['leaderboard']}")
        return {"accepted": True, "message": message, "answer": answer, "status_code": status}
    return {"accepted": False, "message": f"{url}: {answer.get('error', status)} (HTTP {status})", "answer": answer,
            "status_code": status}


def fetch_pack(pack_id: str, url: str, output: Path, content_hash: str | None = None) -> tuple[Path, str]:
    """Download a stored pack version (the newest by default) into ``output``; its hash is checked."""
    import httpx

    from agentsynth_kernel import load_pack

    base = url.rstrip("/")
    try:
        listing = httpx.get(f"{base}/api/packs/{pack_id}", timeout=60)
        if listing.status_code == 404:
            raise AgentsynthError(f"{url}: {listing.json().get('error')}")
        listing.raise_for_status()
        versions = listing.json()["versions"]
        chosen = next((v for v in versions if v["content_hash"] == content_hash), None) if content_hash else versions[-1]
        if chosen is None:
            raise AgentsynthError(f"{url}: {pack_id} has no version {content_hash}")
        archive = httpx.get(f"{base}/api/packs/{pack_id}/{chosen['content_hash']}.tar.gz", timeout=300)
        archive.raise_for_status()
    except httpx.HTTPError as exc:
        raise AgentsynthError(f"{url}: {type(exc).__name__}: {exc}") from None
    if output.exists() and any(output.iterdir()):
        raise AgentsynthError(f"{output}: exists and is not empty")
    partial = output.with_name(output.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.content), mode="r:gz") as tar:
        tar.extractall(partial, filter="data")
    pack = load_pack(partial, validate=False)
    if pack.content_hash != chosen["content_hash"]:
        raise AgentsynthError(f"{output}: files hash to {pack.content_hash}, the hub said {chosen['content_hash']}")
    if output.exists():
        output.rmdir()
    partial.rename(output)
    return output, pack.content_hash


def resolve_remote_pack(ref: str, hub: str, cache: Path | None = None) -> Path | None:
    """A pack this machine does not have, from ``hub``: its newest version, cached by content hash
    (``~/.cache/agentsynth/hub-packs/HASH/ID``); None when the hub has no such pack."""
    import httpx

    cache = cache or CACHE
    try:
        listing = httpx.get(f"{hub.rstrip('/')}/api/packs/{ref}", timeout=60)
    except httpx.HTTPError as exc:
        raise AgentsynthError(f"--hub {hub}: {type(exc).__name__}: {exc}") from None
    if listing.status_code == 404:
        return None
    listing.raise_for_status()
    newest = listing.json()["versions"][-1]["content_hash"]
    target = cache / newest.replace(":", "-") / ref
    if (target / "pack.yaml").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    return fetch_pack(ref, hub, target, newest)[0]
