"""The embedded servers of this process: started on first use, shared, stopped at run end and at exit.

One server per GGUF file, whoever asks (policy, judge, teacher): the model is loaded once. A server
is a child process (``python -m agentsynth_local.server``) on a free port of 127.0.0.1; it exits when
its stdin pipe closes, which happens when this process stops it or dies in any way (SIGKILL too).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from agentsynth_kernel import AgentsynthError

from .models import embedded_name, external_endpoint, find_gguf

DEFAULT_CTX = 4096


def _say(message: str) -> None:
    if os.environ.get("AGENTSYNTH_LOCAL_QUIET", "") in ("", "0"):
        print(f"agentsynth-local: {message}", file=sys.stderr, flush=True)


class EmbeddedServer:
    """One running ``agentsynth_local.server`` process."""

    def __init__(self, path: Path, name: str, ctx: int) -> None:
        self.path, self.name, self.ctx = path, name, ctx
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.api_base = ""
        self.log: IO[bytes] | None = None
        self.runtime = ""

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float) -> None:
        runtime = os.environ.get("AGENTSYNTH_LOCAL_RUNTIME", "").strip()
        if not any(importlib.util.find_spec(m) for m in ([runtime] if runtime else ["llama_cpp", "mistralrs"])):
            wanted = {"llama_cpp": "llama-cpp-python"}.get(runtime, runtime) or "llama-cpp-python"
            raise AgentsynthError(f"model 'local' needs a runtime: pip install {wanted} (llama-cpp-python compiles "
                                  "llama.cpp, several minutes the first time; mistralrs is a prebuilt wheel)")
        size = self.path.stat().st_size / 1e6
        _say(f"starting {self.name} ({size:.0f} MB, {self.ctx}-token context) on 127.0.0.1 ...")
        began = time.monotonic()
        self.log = tempfile.TemporaryFile()  # the server's stderr, shown if it fails
        threads = os.environ.get("AGENTSYNTH_LOCAL_THREADS")
        argv = [sys.executable, "-m", "agentsynth_local.server", "--model", str(self.path), "--name", self.name,
                "--ctx", str(self.ctx), "--watch-stdin", *(["--threads", threads] if threads else []),
                *(["--runtime", runtime] if runtime else [])]
        # own session: a Ctrl-C in the terminal reaches agentsynth, which stops the server itself
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                        start_new_session=True)
        line = self._ready_line(timeout)
        parts = line.split()
        if len(parts) < 2 or parts[0] != "READY":
            self.stop()
            raise AgentsynthError(f"the embedded model server for {self.name} failed to start: {self._log_tail()}")
        self.port = int(parts[1])
        self.ctx = int(parts[2]) if len(parts) > 2 else self.ctx
        self.runtime = parts[3] if len(parts) > 3 else "?"
        self.api_base = f"http://127.0.0.1:{self.port}/v1"
        _say(f"{self.name} ready in {time.monotonic() - began:.1f} s at {self.api_base} ({self.runtime})")

    def _ready_line(self, timeout: float) -> str:
        assert self.process is not None and self.process.stdout is not None
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.process.stdout.readline().decode()),  # type: ignore[union-attr]
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        if not box:
            self.stop()
            raise AgentsynthError(f"the embedded model server for {self.name} was not ready after {timeout:g} s "
                                  f"(set AGENTSYNTH_LOCAL_START_TIMEOUT to wait longer): {self._log_tail()}")
        return box[0]

    def _log_tail(self) -> str:
        if self.log is None:
            return "(no log)"
        try:
            self.log.seek(0)
            text = self.log.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return "(no log)"
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return " | ".join(lines[-5:]) or "(it printed nothing)"

    def stop(self, grace: float = 5.0) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        try:
            if process.stdin:
                process.stdin.close()  # the server exits on EOF
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        except OSError:
            pass
        for stream in (process.stdout,):
            if stream:
                stream.close()
        if self.log is not None:
            self.log.close()
            self.log = None


class Manager:
    """The process-wide table of endpoints: embedded servers and servers the user runs."""

    def __init__(self) -> None:
        self.servers: dict[Path, EmbeddedServer] = {}
        self.endpoints: dict[str, tuple[str, str, EmbeddedServer | None]] = {}
        self.lock = threading.RLock()

    def endpoint(self, model: str) -> tuple[str, str]:
        """(api_base, model name on the wire) for ``local`` / ``local/NAME``; starts the server if needed."""
        cached = self.endpoints.get(model)
        if cached is not None and (cached[2] is None or cached[2].alive()):
            return cached[0], cached[1]
        with self.lock:
            cached = self.endpoints.get(model)
            if cached is not None and (cached[2] is None or cached[2].alive()):
                return cached[0], cached[1]
            name = embedded_name(model)
            external = external_endpoint(model, name)
            if external is not None:
                self.endpoints[model] = (*external, None)
                return external
            path = find_gguf(name)
            server = self.servers.get(path)
            if server is None or not server.alive():
                ctx = int(os.environ.get("AGENTSYNTH_LOCAL_CTX", DEFAULT_CTX))
                server = EmbeddedServer(path, path.name.removesuffix(".gguf"), ctx)
                server.start(float(os.environ.get("AGENTSYNTH_LOCAL_START_TIMEOUT", 600)))
                self.servers[path] = server
            self.endpoints[model] = (server.api_base, server.name, server)
            return server.api_base, server.name

    def stop_all(self) -> None:
        with self.lock:
            servers = list(self.servers.values())
            self.servers.clear()
            self.endpoints.clear()
        for server in servers:
            if server.alive():
                server.stop()
                _say(f"stopped {server.name}")


MANAGER = Manager()
atexit.register(MANAGER.stop_all)
