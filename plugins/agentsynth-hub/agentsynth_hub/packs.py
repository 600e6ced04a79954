"""Packs on the hub: stored as a tar.gz of the pack directory, keyed by (id, content hash).

The content hash is the kernel's own (``load_pack`` computes it over file names and bytes), so a
pack extracted from its archive has the hash it was stored under, and a submission names exactly
the pack it ran.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

from agentsynth_kernel import AgentsynthError

from .db import HubDB

SKIP_SUFFIXES = (".pyc", ".db-wal", ".db-shm")


def archive_pack(base_dir: Path) -> bytes:
    """A deterministic tar.gz of a pack directory (sorted names, no owners or times)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for path in sorted(p for p in base_dir.rglob("*") if p.is_file()):
            if "__pycache__" in path.parts or path.suffix in SKIP_SUFFIXES:
                continue
            info = tarfile.TarInfo(str(path.relative_to(base_dir)))
            data = path.read_bytes()
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def add_pack(db: HubDB, ref: str) -> dict[str, Any]:
    """Store a pack (a registered name or a path) on the hub; returns its record."""
    from agentsynth_kernel import load_pack

    pack = load_pack(ref)
    if pack.source.endswith("pack.yaml") is False:
        raise AgentsynthError(f"{ref}: the hub stores pack directories (with pack.yaml), not single-file packs")
    archive = archive_pack(pack.base_dir)
    added = db.add_pack(pack.id, pack.content_hash, pack.version, pack.description.strip(), archive)
    return {"pack_id": pack.id, "content_hash": pack.content_hash, "version": pack.version, "added": added,
            "bytes": len(archive)}


def materialize(db: HubDB, pack_id: str, content_hash: str, cache: Path) -> Path | None:
    """The directory of a stored pack version, extracted once under ``cache`` (None if not stored)."""
    if not any(v["content_hash"] == content_hash for v in db.pack_versions(pack_id)):
        return None  # the database decides what exists, never the cache directory
    target = cache / content_hash.replace(":", "-") / pack_id
    if (target / "pack.yaml").is_file():
        return target
    archive = db.pack_archive(pack_id, content_hash)
    if archive is None:
        return None
    partial = target.with_name(target.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(partial, filter="data")  # no absolute paths, no '..', no links out
    partial.rename(target)
    return target


def load_stored_pack(db: HubDB, pack_id: str, content_hash: str, cache: Path) -> Any:
    """The hub's pack object for a stored version; its content hash is checked after extraction."""
    from agentsynth_kernel import load_pack

    path = materialize(db, pack_id, content_hash, cache)
    if path is None:
        return None
    pack = load_pack(path)
    if pack.content_hash != content_hash:
        raise AgentsynthError(f"stored pack {pack_id} {content_hash}: extracted files hash to {pack.content_hash}")
    return pack
