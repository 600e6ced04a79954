"""The hub's database: packs (by content hash), submitter tokens (hashed), submissions.

SQLAlchemy Core, so the same code runs on SQLite (the default, a file) and PostgreSQL
(``postgresql+psycopg://...``, with the ``postgres`` extra). Nothing here holds a secret:
a token is stored as its sha256 only.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from agentsynth_kernel import AgentsynthError

metadata = sa.MetaData()

packs = sa.Table(
    "packs", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("pack_id", sa.String(200), nullable=False),
    sa.Column("content_hash", sa.String(80), nullable=False),
    sa.Column("version", sa.String(50), nullable=False, default=""),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("archive", sa.LargeBinary, nullable=False),  # tar.gz of the pack directory
    sa.Column("added_at", sa.Float, nullable=False),
    sa.UniqueConstraint("pack_id", "content_hash", name="uq_pack_version"),
)

tokens = sa.Table(
    "tokens", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(100), nullable=False, unique=True),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("revoked", sa.Boolean, nullable=False, default=False),
)

submissions = sa.Table(
    "submissions", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("submitter", sa.String(100), nullable=False),
    sa.Column("received_at", sa.Float, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),  # accepted | refused
    sa.Column("reason", sa.Text, nullable=False, default=""),
    sa.Column("pack_id", sa.String(200), nullable=False, default=""),
    sa.Column("content_hash", sa.String(80), nullable=False, default=""),
    sa.Column("run_id", sa.String(64), nullable=False, default=""),
    sa.Column("run_hash", sa.String(80), nullable=False, default=""),
    sa.Column("label", sa.String(300), nullable=False, default=""),
    # sha256 over every episode's (task, trial, seed, status) and trajectory bytes: the same episodes
    # submitted again under another run id are a copy, not a new result
    sa.Column("episodes_digest", sa.String(80), nullable=False, default=""),
    sa.Column("episodes", sa.Integer, nullable=False, default=0),
    sa.Column("passed", sa.Integer, nullable=False, default=0),
    sa.Column("details", sa.Text, nullable=False, default="{}"),  # recomputed summary, verification, provenance
    sa.Column("payload", sa.LargeBinary, nullable=True),  # the submission as received (gzip JSON)
    sa.Index("ix_submissions_pack", "pack_id", "status"),
    sa.Index("ix_submissions_submitter", "submitter", "received_at"),
)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def database_url(db: str) -> str:
    """A SQLAlchemy URL from ``--db``: a URL as is, anything else a SQLite file path."""
    if "://" in db:
        return db
    return f"sqlite:///{Path(db).resolve()}"


class HubDB:
    """The hub's tables on one engine; every method is one short transaction."""

    def __init__(self, db: str) -> None:
        url = database_url(db)
        try:
            self.engine = sa.create_engine(url, future=True)
            if url.startswith("sqlite"):
                @sa.event.listens_for(self.engine, "connect")
                def _pragmas(conn: Any, _record: Any) -> None:
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute("PRAGMA busy_timeout=10000")
            metadata.create_all(self.engine)
        except (sa.exc.SQLAlchemyError, ImportError) as exc:
            shown = sa.engine.make_url(url).render_as_string(hide_password=True) if "://" in url else url
            raise AgentsynthError(f"hub database {shown}: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None

    # --- tokens ------------------------------------------------------------------------------------

    def create_token(self, name: str) -> str:
        """A new random token for submitter ``name``; only its hash is stored. Returns the token."""
        if not name or len(name) > 100 or not all(c.isalnum() or c in "-_." for c in name):
            raise AgentsynthError(f"token name {name!r}: use 1-100 letters, digits, '-', '_' or '.'")
        token = "ash_" + secrets.token_urlsafe(32)
        try:
            with self.engine.begin() as conn:
                conn.execute(tokens.insert().values(name=name, token_hash=hash_token(token), created_at=time.time(),
                                                    revoked=False))
        except sa.exc.IntegrityError:
            raise AgentsynthError(f"token name {name!r} is already taken") from None
        return token

    def revoke_token(self, name: str) -> bool:
        with self.engine.begin() as conn:
            return conn.execute(tokens.update().where(tokens.c.name == name).values(revoked=True)).rowcount > 0

    def submitter(self, token: str) -> str | None:
        """The submitter a presented token belongs to (None: unknown or revoked)."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(tokens.c.name, tokens.c.revoked)
                               .where(tokens.c.token_hash == hash_token(token))).first()
        return row.name if row is not None and not row.revoked else None

    def list_tokens(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(tokens.c.name, tokens.c.created_at, tokens.c.revoked)
                                .order_by(tokens.c.name)).all()
        return [dict(r._mapping) for r in rows]

    # --- packs -------------------------------------------------------------------------------------

    def add_pack(self, pack_id: str, content_hash: str, version: str, description: str, archive: bytes) -> bool:
        """Store a pack version; False if that (id, hash) was already there."""
        try:
            with self.engine.begin() as conn:
                conn.execute(packs.insert().values(pack_id=pack_id, content_hash=content_hash, version=version,
                                                   description=description, archive=archive, added_at=time.time()))
        except sa.exc.IntegrityError:
            return False
        return True

    def pack_versions(self, pack_id: str | None = None) -> list[dict[str, Any]]:
        query = sa.select(packs.c.pack_id, packs.c.content_hash, packs.c.version, packs.c.description,
                          packs.c.added_at).order_by(packs.c.pack_id, packs.c.added_at)
        if pack_id is not None:
            query = query.where(packs.c.pack_id == pack_id)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query).all()]

    def pack_archive(self, pack_id: str, content_hash: str) -> bytes | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(packs.c.archive).where(packs.c.pack_id == pack_id,
                                                                packs.c.content_hash == content_hash)).first()
        return bytes(row.archive) if row is not None else None

    # --- submissions -------------------------------------------------------------------------------

    def recent_submissions(self, submitter: str, since: float) -> tuple[int, float]:
        """(attempts by ``submitter`` since ``since``, time of the oldest of them) for the rate limit."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(sa.func.count(), sa.func.min(submissions.c.received_at))
                               .where(submissions.c.submitter == submitter,
                                      submissions.c.received_at >= since)).first()
        return int(row[0]), float(row[1] or since)

    def add_submission(self, **values: Any) -> int:
        values.setdefault("received_at", time.time())
        values["details"] = json.dumps(values.get("details") or {}, sort_keys=True, default=str)
        with self.engine.begin() as conn:
            result = conn.execute(submissions.insert().values(**values))
            return int(result.inserted_primary_key[0])

    def submission(self, number: int) -> dict[str, Any] | None:
        cols = [c for c in submissions.c if c.name != "payload"]
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(*cols).where(submissions.c.id == number)).first()
        if row is None:
            return None
        out = dict(row._mapping)
        out["details"] = json.loads(out["details"])
        return out

    def already_accepted(self, run_id: str, run_hash: str, episodes_digest: str = "") -> int | None:
        """The accepted submission that is this run (same id and hash) or holds the same episodes."""
        same_run = sa.and_(submissions.c.run_id == run_id, submissions.c.run_hash == run_hash)
        cond = sa.or_(same_run, submissions.c.episodes_digest == episodes_digest) if episodes_digest else same_run
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(submissions.c.id).where(cond, submissions.c.status == "accepted")).first()
        return int(row.id) if row is not None else None

    def accepted(self, pack_id: str) -> list[dict[str, Any]]:
        cols = [c for c in submissions.c if c.name not in ("payload",)]
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(*cols).where(submissions.c.pack_id == pack_id,
                                                       submissions.c.status == "accepted")
                                .order_by(submissions.c.id)).all()
        out = []
        for row in rows:
            item = dict(row._mapping)
            item["details"] = json.loads(item["details"])
            out.append(item)
        return out

    def close(self) -> None:
        self.engine.dispose()
