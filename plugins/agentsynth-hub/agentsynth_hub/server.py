"""The hub's web app (Starlette): submissions in, leaderboards out.

Routes:

- ``POST /api/submissions``: a submission (gzip JSON, ``Authorization: Bearer TOKEN``). 401 without a
  valid token, 429 over the submitter's rate limit, 413 over the size limit (compressed or not),
  400 for a payload that is not one, 422 with the reason for a refused one, 201 when accepted.
- ``GET /api/submissions/N``: what the hub recorded (a refused one keeps its reason).
- ``GET /api/packs``, ``GET /api/packs/ID``: the packs and their versions;
  ``GET /api/packs/ID/HASH.tar.gz``: a pack version's files.
- ``GET /api/packs/ID/leaderboard`` (JSON) and ``GET /packs/ID`` (HTML): ranked accepted
  submissions with Wilson 95 % intervals; entries whose interval overlaps the leader's share rank 1.
- ``GET /``: the list of packs (HTML).
"""

from __future__ import annotations

import asyncio
import html
import json
import time
import zlib
from pathlib import Path
from typing import Any

import attrs
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from .db import HubDB
from .verify import Refused, check_submission

MB = 1 << 20


@attrs.define
class HubConfig:
    db: str
    cache: Path
    max_upload_bytes: int = 20 * MB  # compressed, as sent
    max_payload_bytes: int = 200 * MB  # decompressed
    rate_limit: int = 20  # submissions per submitter per window
    rate_window_s: float = 3600.0
    sample: int = 32  # episodes replayed per submission (passed ones first)


def boards(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One ranked board per (pack version, split): results on different files or tasks are not
    compared. Newest pack version first."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in entries:
        split = e["details"].get("provenance", {}).get("split", "")
        groups.setdefault((e["content_hash"], split), []).append(e)
    order = sorted(groups, key=lambda key: -max(e["id"] for e in groups[key]))
    return [{"content_hash": h, "split": split, "entries": leaderboard(groups[(h, split)])} for h, split in order]


def leaderboard(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rank accepted submissions by pass rate; an entry whose Wilson 95 % interval overlaps the
    leader's shares rank 1 ("statistically tied"), the others take their position."""
    from agentsynth_kernel import wilson_interval

    rows = []
    for e in entries:
        low, high = wilson_interval(e["passed"], e["episodes"])
        prov = e["details"].get("provenance", {})
        rows.append({"submission": e["id"], "submitter": e["submitter"], "label": e["label"],
                     "run_id": e["run_id"], "run_hash": e["run_hash"], "content_hash": e["content_hash"],
                     "split": prov.get("split", ""), "trials": prov.get("trials", 1),
                     "episodes": e["episodes"], "passed": e["passed"],
                     "pass_rate": e["passed"] / e["episodes"] if e["episodes"] else 0.0,
                     "ci95": [round(low, 4), round(high, 4)], "received_at": e["received_at"],
                     "replayed": e["details"].get("verification", {}).get("replayed", 0)})
    rows.sort(key=lambda r: (-r["pass_rate"], -r["episodes"], r["submission"]))
    if not rows:
        return rows
    lead_low = rows[0]["ci95"][0]
    for position, row in enumerate(rows, 1):
        row["rank"] = 1 if row["ci95"][1] >= lead_low else position
    tied = sum(r["rank"] == 1 for r in rows) > 1
    for row in rows:
        row["tied"] = tied and row["rank"] == 1
    return rows


def _page(title: str, body: str) -> HTMLResponse:
    return HTMLResponse(
        "<!doctype html><html lang=en><head><meta charset=utf-8><link rel=icon href='data:,'>"
        f"<title>{html.escape(title)}</title><style>body{{font:15px system-ui,sans-serif;margin:2em}}"
        "table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left}"
        ".tied{color:#8a5a00}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


def create_app(config: HubConfig) -> Starlette:
    db = HubDB(config.db)
    config.cache.mkdir(parents=True, exist_ok=True)
    verifying = asyncio.Semaphore(1)  # replays are CPU work: one submission at a time

    def submitter_of(request: Request) -> str | None:
        auth = request.headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return db.submitter(token.strip())

    async def read_body(request: Request) -> bytes:
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > config.max_upload_bytes):
            raise _TooLarge(f"upload of {length} bytes exceeds the limit of {config.max_upload_bytes} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > config.max_upload_bytes:
                raise _TooLarge(f"upload exceeds the limit of {config.max_upload_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def decompress(body: bytes, encoding: str) -> bytes:
        if encoding in ("", "identity"):
            if len(body) > config.max_payload_bytes:
                raise _TooLarge(f"submission exceeds {config.max_payload_bytes} bytes")
            return body
        if encoding != "gzip":
            raise _BadRequest(f"Content-Encoding {encoding!r} is not supported (gzip or none)")
        inflater = zlib.decompressobj(wbits=31)
        try:
            out = inflater.decompress(body, config.max_payload_bytes + 1)
        except zlib.error as exc:
            raise _BadRequest(f"not gzip data: {exc}") from None
        if len(out) > config.max_payload_bytes or inflater.unconsumed_tail:
            raise _TooLarge(f"decompressed submission exceeds {config.max_payload_bytes} bytes")
        return out

    async def submit(request: Request) -> Response:
        who = submitter_of(request)
        if who is None:
            return _error(401, "missing or invalid token (Authorization: Bearer TOKEN; a token comes from"
                               " `agentsynth hub token create NAME` on the hub)")
        now = time.time()
        count, oldest = db.recent_submissions(who, now - config.rate_window_s)
        if count >= config.rate_limit:
            retry = max(1, int(oldest + config.rate_window_s - now) + 1)
            return JSONResponse({"error": f"rate limit: {count} submissions by {who} in the last"
                                          f" {config.rate_window_s:g} s (at most {config.rate_limit})"},
                                status_code=429, headers={"Retry-After": str(retry)})
        try:
            body = await read_body(request)
            raw = decompress(body, request.headers.get("content-encoding", "").strip().lower())
            try:
                payload = json.loads(raw)
            except ValueError as exc:
                raise _BadRequest(f"not JSON: {exc}") from None
        except _TooLarge as exc:
            db.add_submission(submitter=who, status="refused", reason=f"size: {exc}", received_at=now)
            return _error(413, str(exc))
        except _BadRequest as exc:
            db.add_submission(submitter=who, status="refused", reason=f"format: {exc}", received_at=now)
            return _error(400, str(exc))
        async with verifying:
            try:
                entry = await check_submission(payload, db=db, cache=config.cache, sample=config.sample)
            except Refused as exc:
                meta = payload.get("meta") if isinstance(payload, dict) else None
                pack = (meta or {}).get("pack") if isinstance(meta, dict) else None
                pack = pack if isinstance(pack, dict) else {}
                number = db.add_submission(
                    submitter=who, status="refused", reason=str(exc), received_at=now, payload=body,
                    pack_id=str(pack.get("id", ""))[:200], content_hash=str(pack.get("content_hash", ""))[:80],
                    run_id=str((meta or {}).get("run_id", ""))[:64] if isinstance(meta, dict) else "")
                return _error(422, f"refused: {exc}", check=exc.check, submission=number)
        number = db.add_submission(submitter=who, status="accepted", received_at=now, payload=body, **entry)
        mine = next(r for b in boards(db.accepted(entry["pack_id"])) for r in b["entries"] if r["submission"] == number)
        return JSONResponse({"submission": number, "status": "accepted", "rank": mine["rank"], "tied": mine["tied"],
                             "pass_rate": mine["pass_rate"], "ci95": mine["ci95"],
                             "replayed": entry["details"]["verification"]["replayed"],
                             "leaderboard": str(request.url_for("pack_page", pack_id=entry["pack_id"]))},
                            status_code=201)

    async def submission(request: Request) -> Response:
        found = db.submission(int(request.path_params["number"]))
        if found is None:
            return _error(404, "no such submission")
        return JSONResponse(found)

    async def packs_api(request: Request) -> Response:
        return JSONResponse({"packs": db.pack_versions()})

    async def pack_api(request: Request) -> Response:
        versions = db.pack_versions(request.path_params["pack_id"])
        if not versions:
            return _error(404, f"pack {request.path_params['pack_id']!r} is not on this hub")
        return JSONResponse({"pack_id": request.path_params["pack_id"], "versions": versions})

    async def pack_archive(request: Request) -> Response:
        data = db.pack_archive(request.path_params["pack_id"], request.path_params["content_hash"])
        if data is None:
            return _error(404, "no such pack version")
        return Response(data, media_type="application/gzip")

    async def board_api(request: Request) -> Response:
        pack_id = request.path_params["pack_id"]
        versions = db.pack_versions(pack_id)
        if not versions:
            return _error(404, f"pack {pack_id!r} is not on this hub")
        return JSONResponse({"pack_id": pack_id, "versions": versions, "tie_rule":
                             "entries whose Wilson 95% interval overlaps the leader's share rank 1",
                             "boards": boards(db.accepted(pack_id))})

    async def pack_page(request: Request) -> Response:
        pack_id = request.path_params["pack_id"]
        versions = db.pack_versions(pack_id)
        if not versions:
            return _page("not found", f"<p>pack {html.escape(pack_id)} is not on this hub</p>")
        head = ("<tr><th>rank</th><th>submission</th><th>submitter</th><th>policy</th><th>pass rate</th>"
                "<th>95% CI</th><th>episodes</th><th>trials</th><th>replayed</th></tr>")
        tables = []
        for board in boards(db.accepted(pack_id)):
            body = "".join(
                f"<tr class='{'tied' if r['tied'] else ''}'><td>{r['rank']}{' (tied)' if r['tied'] else ''}</td>"
                f"<td>#{r['submission']}</td><td>{html.escape(r['submitter'])}</td>"
                f"<td>{html.escape(r['label'])}</td><td>{r['pass_rate']:.1%}</td>"
                f"<td>{r['ci95'][0]:.1%} – {r['ci95'][1]:.1%}</td><td>{r['passed']}/{r['episodes']}</td>"
                f"<td>{r['trials']}</td><td>{r['replayed']}</td></tr>" for r in board["entries"])
            tables.append(f"<h2>split {html.escape(board['split'])} · pack <code>"
                          f"{html.escape(board['content_hash'][:19])}</code></h2><table>{head}{body}</table>")
        desc = html.escape(versions[-1]["description"])
        table = "".join(tables) or "<p>no verified submissions yet</p>"
        return _page(f"{pack_id} leaderboard",
                     f"<p>{desc}</p><p>Ranked by pass rate over all submitted episodes; every submission was"
                     " recomputed and a sample of its trajectories replayed in fresh worlds. Entries whose 95%"
                     " Wilson interval overlaps the leader's share rank 1 (statistically tied).</p>" + table)

    async def index(request: Request) -> Response:
        names = sorted({p["pack_id"] for p in db.pack_versions()})
        items = "".join(f"<li><a href='/packs/{html.escape(n)}'>{html.escape(n)}</a></li>" for n in names)
        return _page("agentsynth hub", f"<ul>{items}</ul>" if items else "<p>no packs yet</p>")

    app = Starlette(routes=[
        Route("/", index),
        Route("/packs/{pack_id}", pack_page, name="pack_page"),
        Route("/api/packs", packs_api),
        Route("/api/packs/{pack_id}", pack_api),
        Route("/api/packs/{pack_id}/leaderboard", board_api),
        Route("/api/packs/{pack_id}/{content_hash}.tar.gz", pack_archive),
        Route("/api/submissions", submit, methods=["POST"]),
        Route("/api/submissions/{number:int}", submission),
    ])
    app.state.db = db
    return app


class _TooLarge(Exception):
    pass


class _BadRequest(Exception):
    pass
