"""The content-addressed response cache on disk (one JSON file per request hash)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import msgspec

from ..secrets import redact_bytes
from .records import LLMResponse

_response_encoder = msgspec.json.Encoder()
_response_decoder = msgspec.json.Decoder(LLMResponse)
key_encoder = msgspec.json.Encoder(order="sorted")


def default_cache_dir() -> Path | None:
    """``$AGENTSYNTH_LLM_CACHE`` (``off`` disables), else ``~/.cache/agentsynth/llm``."""
    value = os.environ.get("AGENTSYNTH_LLM_CACHE")
    if value is not None:
        return None if value.strip().lower() in ("", "0", "off", "false", "no") else Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentsynth" / "llm"


class ResponseCache:
    """request hash -> normalized response, one JSON file per entry (written atomically)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> LLMResponse | None:
        try:
            return _response_decoder.decode(self._path(key).read_bytes())
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None

    def put(self, key: str, response: LLMResponse) -> None:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.{random.getrandbits(32):08x}.tmp")
            tmp.write_bytes(redact_bytes(_response_encoder.encode(response)))
            os.replace(tmp, path)
        except OSError:
            pass  # a cache that cannot write is only a slower cache

