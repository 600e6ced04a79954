"""Fixtures: real run directories (made by `agentsynth bench` on the sql plugin's `core` pack, plus
synthetic runs written through the real run store), real Chromium, a real `agentsynth serve`."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentsynth_report.synthetic import write_run

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run"]
# what an agent could write into a tool argument (and get echoed back in an observation)
PAYLOAD = ('<script>window.__pwned = 1</script></script><img src=x onerror="window.__pwned = 2">'
           '<!-- <b onmouseover="window.__pwned=3">x</b>')

EVIL_POLICY = textwrap.dedent(f'''
    PAYLOAD = {PAYLOAD!r}

    def act(state):
        if state.trajectory.steps:
            return {{"answer": PAYLOAD}}
        sql = "SELECT '" + PAYLOAD.replace("'", "''") + "' AS x"
        return {{"tool": "sql_query", "arguments": {{"sql": sql, "note": PAYLOAD}}}}
''')


def agentsynth(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The ``agentsynth`` command line, run in this process (the console script's own ``main``, so
    exit codes and messages are what a user sees; a process per command costs seconds here)."""
    from agentsynth_kernel.cli import main

    out, err = io.StringIO(), io.StringIO()
    before = os.getcwd()
    code: Any = 0
    os.environ["AGENTSYNTH_LLM_CACHE"] = "off"

    def target() -> None:
        nonlocal code
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code

    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            # on a thread of its own: a test holding a (sync) Playwright page has an event loop running
            worker = threading.Thread(target=target)
            worker.start()
            worker.join()
    finally:
        os.chdir(before)
    code = 0 if code is None else code if isinstance(code, int) else 1
    return subprocess.CompletedProcess(["agentsynth", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    (root / "evil.py").write_text(EVIL_POLICY)
    for name, policy in (("oracle", "oracle"), ("random", "random"), ("evil", "callable,function=evil.py:act")):
        done = agentsynth("bench", "--pack", "core", "--policy", policy, "--trials", "2", "--run-dir",
                          str(root / name), "-q", cwd=root)
        assert (root / name / "run.sqlite").is_file(), done.stderr
    write_run(root / "synthetic", tasks=12, trials=4, seed=3, skill=0.55)
    return root


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Page:
    """A fresh page that records console errors and uncaught exceptions."""

    def __init__(self, browser: Any) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}")
                     if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))

    def shot(self, name: str, *, full: bool = False) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=full)
        return path


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    p = Page(browser)
    yield p
    p.context.close()


class Server:
    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc, self.url = proc, url

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.get(self.url + path, timeout=30, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.post(self.url + path, timeout=30, **kw)


def start_server(*args: str) -> Server:
    proc = subprocess.Popen([sys.executable, "-m", "agentsynth_kernel", "serve", *args, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # a dummy key for the scripted LLM server on 127.0.0.1 (tests/test_llm.py)
                            env={**os.environ, "AGENTSYNTH_LLM_CACHE": "off", "HOSTED_VLLM_API_KEY": "sk-test"})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    if not match:
        proc.kill()
        raise AssertionError(f"serve printed {line!r}; stderr: {proc.stderr.read() if proc.stderr else ''}")
    server = Server(proc, f"http://127.0.0.1:{match.group(1)}")
    deadline = time.monotonic() + 20
    while True:
        try:
            if server.get("/api/runs").status_code == 200:
                return server
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("serve did not answer in 20 s")
        time.sleep(0.1)


def stop_server(server: Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.proc.kill()


@pytest.fixture(scope="session")
def server(runs_root: Path) -> Iterator[Server]:
    s = start_server(str(runs_root))
    yield s
    stop_server(s)
