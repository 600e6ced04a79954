"""The static report: one self-contained HTML file for one or more run directories.

Layout of the file: the page's CSS, the digest of every run (JSON), the charting library and the
app, then every episode in gzip+base64 chunks of ``CHUNK`` episodes, decoded by the page only when
an episode is opened. Episodes are streamed from each run store to a temporary file while the
digest is computed, so memory holds one chunk, not the run.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import IO, Any

import msgspec

from agentsynth_kernel import AgentsynthError, EpisodeResult

from .model import check_run_dirs, compare_if_paired, digest_run_dir

CHUNK = 100


def asset(name: str) -> str:
    """A file of the package's ``static`` directory, as text."""
    return resources.files("agentsynth_report").joinpath("static", name).read_text(encoding="utf-8")


def script_json(data: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` that
    the HTML parser could read as the end of the element (``</script>`` in an agent's argument)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _csp_hash(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode() + "'"


def _escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


_episode_encoder = msgspec.json.Encoder()


class _ChunkWriter:
    """Collects episodes of one run and writes them as gzip+base64 ``<script>`` elements."""

    def __init__(self, out: IO[str], run_index: int) -> None:
        self.out, self.run_index = out, run_index
        self.pending: list[bytes] = []
        self.chunks = 0
        self.raw_bytes = 0
        # what every episode of a run repeats (system prompt, tool schemas), written once per run
        self.shared: dict[bytes, int] = {}

    def add(self, index: int, result: EpisodeResult) -> None:
        # provenance is the same for every episode of a run and is shown once, from the digest
        slim = msgspec.structs.replace(result, provenance={})
        ref = -1
        traj = result.trajectory
        if traj is not None and (traj.tools or traj.system_prompt):
            key = _episode_encoder.encode({"system_prompt": traj.system_prompt, "tools": traj.tools})
            ref = self.shared.setdefault(key, len(self.shared))
            slim = msgspec.structs.replace(slim, trajectory=msgspec.structs.replace(traj, tools=[], system_prompt=""))
        self.pending.append(b'{"s":%d,"e":%s}' % (ref, _episode_encoder.encode(slim)))
        if len(self.pending) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        raw = b"[" + b",".join(self.pending) + b"]"
        self.raw_bytes += len(raw)
        packed = base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")
        self.out.write(f'<script type="application/gzip+json" id="c{self.run_index}-{self.chunks}">{packed}</script>\n')
        self.chunks += 1
        self.pending = []

    def close(self) -> None:
        self.flush()
        shared = "[" + ",".join(key.decode() for key in self.shared) + "]"
        self.out.write(f'<script type="application/json" id="shared-{self.run_index}">'
                       f'{script_json(json.loads(shared))}</script>\n')


def build_report(run_dirs: Sequence[Path], output: Path, *, title: str = "",
                 labels: Sequence[str] = ()) -> dict[str, Any]:
    """Write the report of ``run_dirs`` to ``output``; returns what was written (sizes, counts)."""
    run_dirs = check_run_dirs(run_dirs)
    try:
        return _build(run_dirs, Path(output), title, labels)
    except OSError as exc:  # a full disk, a read-only directory: say which file, not a traceback
        raise AgentsynthError(f"{output}: cannot write the report: {exc.strerror or exc}") from None


def _build(run_dirs: Sequence[Path], output: Path, title: str, labels: Sequence[str]) -> dict[str, Any]:
    started = time.perf_counter()
    output.parent.mkdir(parents=True, exist_ok=True)
    digests = []
    raw = 0
    # the episodes go to a temporary file next to the output while the digests are computed
    fd, tmp_name = tempfile.mkstemp(prefix=".agentsynth-report-", suffix=".part", dir=output.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as chunks:
            for i, run_dir in enumerate(run_dirs):
                writer = _ChunkWriter(chunks, i)
                label = labels[i] if i < len(labels) else ""
                digest = digest_run_dir(run_dir, label=label, on_episode=writer.add)
                writer.close()
                raw += writer.raw_bytes
                digests.append(digest)
        _dedupe_labels(digests)
        page_title = title or _title(digests)
        bundle = {
            "title": page_title, "runs": digests, "chunk": CHUNK,
            "compare": compare_if_paired(digests),
            "generated_at": time.time(),
        }
        app, uplot = asset("app.js"), asset("vendor/uPlot.iife.min.js")
        csp = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
               f"script-src {_csp_hash(uplot)} {_csp_hash(app)}")
        final = output.with_name(output.name + ".tmp")
        with open(final, "w", encoding="utf-8") as out:
            out.write("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
            out.write(f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n')
            out.write('<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">\n')
            out.write(f"<title>{_escape_text(page_title)}</title>\n")
            out.write(f"<style>{asset('vendor/uPlot.min.css')}\n{asset('app.css')}</style>\n</head><body>\n")
            out.write('<div id="app"><p>Loading the report…</p></div>\n')
            out.write(f'<script type="application/json" id="report-data">{script_json(bundle)}</script>\n')
            out.write(f"<script>{uplot}</script>\n<script>{app}</script>\n")
            with open(tmp_name, encoding="utf-8") as src:
                while block := src.read(1 << 20):
                    out.write(block)
            out.write("</body></html>\n")
        os.replace(final, output)
    finally:
        Path(tmp_name).unlink(missing_ok=True)
    return {
        "path": str(output), "bytes": output.stat().st_size, "runs": len(digests),
        "episodes": sum(d["episodes"] for d in digests), "episode_json_bytes": raw,
        "seconds": round(time.perf_counter() - started, 3),
    }


def _title(digests: list[dict[str, Any]]) -> str:
    packs = sorted({d["pack"]["id"] for d in digests})
    return f"agentsynth report · {', '.join(packs)} · {len(digests)} run(s)"


def _dedupe_labels(digests: list[dict[str, Any]]) -> None:
    """Two runs of the same policy on the same pack get their run id added to tell them apart."""
    seen: dict[str, int] = {}
    for d in digests:
        seen[d["label"]] = seen.get(d["label"], 0) + 1
    for d in digests:
        if seen[d["label"]] > 1:
            d["label"] = f"{d['label']} ({d['run_id'] or Path(d['run_dir']).name})"
