"""Documents as a world: ``--docs PATH`` gives the agent ``search_documents`` and ``read_document`` over
your files, executed for real here (a deterministic keyword index, no model in the loop), so answers
are grounded in the documents. Without queries, the model writes one question per sampled passage.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

from agentsynth_kernel import Observation, SpecError, ToolCall, ToolSpec

SUFFIXES = (".txt", ".md", ".rst", ".json", ".csv", ".html", ".yaml", ".yml")
MAX_FILE_BYTES = 2_000_000
MAX_TOTAL_BYTES = 50_000_000
MAX_FILES = 5_000
CHUNK_CHARS = 1_200
_WORD = re.compile(r"[a-z0-9]+")

TOOLS = [
    ToolSpec("search_documents", "Search the documents; returns the best passages with their document and chunk.",
             {"type": "object", "properties": {"query": {"type": "string", "minLength": 1},
                                                "limit": {"type": "integer", "minimum": 1, "maximum": 10}},
              "required": ["query"]}),
    ToolSpec("read_document", "Read one passage of a document (chunk 0 is its start).",
             {"type": "object", "properties": {"name": {"type": "string"}, "chunk": {"type": "integer", "minimum": 0}},
              "required": ["name"]}),
]


class Corpus:
    """Chunks of the files under a path, and an index over their words."""

    def __init__(self, path: Path) -> None:
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        if not path.exists():
            raise SpecError(str(path), ["--docs: no such file or directory"])
        if not files:
            raise SpecError(str(path), [f"--docs: no documents ({', '.join(SUFFIXES)}) found"])
        if len(files) > MAX_FILES:
            raise SpecError(str(path), [f"--docs: {len(files):,} files; at most {MAX_FILES:,} are read"])
        self.chunks: list[tuple[str, int, str]] = []  # (document name, chunk number, text)
        total = 0
        root = path if path.is_dir() else path.parent
        for file in files:
            size = file.stat().st_size
            total += size
            if size > MAX_FILE_BYTES or total > MAX_TOTAL_BYTES:
                raise SpecError(str(file), [f"--docs: documents are read up to {MAX_FILE_BYTES:,} bytes each and "
                                            f"{MAX_TOTAL_BYTES:,} in all"])
            text = file.read_text(encoding="utf-8", errors="replace")
            name = str(file.relative_to(root))
            for n, start in enumerate(range(0, max(len(text), 1), CHUNK_CHARS)):
                piece = text[start:start + CHUNK_CHARS].strip()
                if piece:
                    self.chunks.append((name, n, piece))
        self.words = [Counter(_WORD.findall(c[2].lower())) for c in self.chunks]
        df: Counter[str] = Counter()
        for counts in self.words:
            df.update(counts.keys())
        self.idf = {w: math.log(1 + len(self.chunks) / n) for w, n in df.items()}

    def search(self, query: str, limit: int = 3) -> list[dict[str, Any]]:
        terms = set(_WORD.findall(query.lower()))
        scored = []
        for i, counts in enumerate(self.words):
            score = sum(self.idf.get(t, 0.0) * (1 + math.log(counts[t])) for t in terms if counts[t])
            if score > 0:
                scored.append((-score, i))
        scored.sort()
        return [{"document": self.chunks[i][0], "chunk": self.chunks[i][1], "score": round(-s, 3),
                 "text": self.chunks[i][2][:600]} for s, i in scored[:limit]]

    def read(self, name: str, chunk: int = 0) -> str | None:
        for doc, n, text in self.chunks:
            if doc == name and n == chunk:
                return text
        return None

    def sample(self, n: int, seed: int) -> list[tuple[str, int, str]]:
        rng = random.Random(f"docs:{seed}")
        picks = list(range(len(self.chunks)))
        rng.shuffle(picks)
        return [self.chunks[i] for i in picks[:n]]


class DocumentTools:
    """The documents world: both tools run here, for real; nothing is simulated."""

    grounding = "documents"

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self.specs = list(TOOLS)
        self.initial = ""
        self.system = ("Answer from the documents: search them, read what you need, and cite the document names "
                       "you used. If the documents do not say, answer that they do not.")

    async def open(self, seed: int) -> None:
        return None

    async def call(self, action: ToolCall, history: list[dict[str, Any]]) -> Observation:
        args = action.arguments
        if action.name == "search_documents":
            hits = self.corpus.search(str(args.get("query", "")), int(args.get("limit", 3)))
            return Observation(json.dumps(hits, ensure_ascii=False) if hits else "[]")
        if action.name == "read_document":
            text = self.corpus.read(str(args.get("name", "")), int(args.get("chunk", 0)))
            if text is None:
                names = sorted({c[0] for c in self.corpus.chunks})[:20]
                return Observation(f"error: no document {args.get('name')!r} chunk {args.get('chunk', 0)} "
                                   f"(documents: {', '.join(names)})", error=True)
            return Observation(text)
        return Observation(f"error: unknown tool {action.name!r}", error=True)

    async def close(self) -> None:
        return None
