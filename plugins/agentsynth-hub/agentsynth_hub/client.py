"""The submitter's side: a run directory as a submission, posted to a hub."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

from agentsynth_kernel import AgentsynthError

from .verify import FORMAT

TOKEN_ENV = "AGENTSYNTH_HUB_TOKEN"


def build_submission(run_dir: Path, *, label: str = "") -> dict[str, Any]:
    """What a run directory submits: its stored meta, its status summary and every episode, as
    stored (secrets were redacted when they were written)."""
    from agentsynth_kernel import RunStore, run_status, to_builtins

    store = RunStore(Path(run_dir), create=False)
    try:
        meta = {key: store.get_meta(key) for key in ("run_id", "run_hash", "spec", "pack", "versions", "planned")}
        episodes = [to_builtins(r) for r in store.results()]
    finally:
        store.close()
    if not isinstance(meta["spec"], dict) or not meta["run_hash"]:
        raise AgentsynthError(f"{run_dir}: not a run written by `agentsynth run` or `bench --run-dir` (no spec or"
                              " run hash); nothing to submit")
    summary = json.loads(json.dumps(run_status(Path(run_dir)), default=str))
    return {"format": FORMAT, "label": label, "meta": meta, "summary": summary, "episodes": episodes}


def encode(payload: dict[str, Any]) -> bytes:
    return gzip.compress(json.dumps(payload, separators=(",", ":")).encode(), compresslevel=6)


def post(url: str, body: bytes, *, token: str | None, timeout: float = 600.0) -> tuple[int, dict[str, Any]]:
    """POST an encoded submission; (status code, the hub's JSON answer)."""
    import httpx

    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    endpoint = url.rstrip("/") + "/api/submissions"
    try:
        response = httpx.post(endpoint, content=body, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        raise AgentsynthError(f"{endpoint}: {type(exc).__name__}: {exc}") from None
    try:
        answer = response.json()
    except ValueError:
        answer = {"error": response.text[:500]}
    return response.status_code, answer if isinstance(answer, dict) else {"error": str(answer)[:500]}


def token_from_env() -> str:
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise AgentsynthError(f"{TOKEN_ENV} is not set: put the token the hub's operator gave you"
                              " (`agentsynth hub token create NAME`) in the environment")
    return token
