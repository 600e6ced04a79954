"""`agentsynth export ... --push-to-hub REPO` through the real huggingface_hub client.

The Hugging Face Hub cannot run here, so the server is a STAND-IN: `StandInHub` below, on
127.0.0.1, speaking the part of the Hub HTTP API that huggingface_hub 2.x calls for
``HfApi.create_repo`` and ``HfApi.create_commit`` (what ``upload_file`` / ``upload_folder`` use):
``POST /api/repos/create`` (409 when the repo exists), ``POST /api/validate-yaml`` (the card's
front matter), ``POST /api/datasets/NS/NAME/preupload/REV`` (the upload mode per file) and
``POST /api/datasets/NS/NAME/commit/REV`` (an NDJSON header line, then one line per file). The
stand-in answers ``regular`` to every preupload, so files travel base64 inside the commit; the real
Hub answers ``lfs`` for large or binary files, which then go through the LFS/Xet upload endpoints
that the stand-in does not speak (that path is untested here).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

TOKEN = "hf_standin_" + "x" * 24


class StandInHub:
    """A stand-in for huggingface.co: repos and files in memory, every request recorded."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.repos: dict[str, dict] = {}  # "datasets/ns/name" -> {"private": bool, "files": {path: bytes}, "commits": []}
        self.requests: list[tuple[str, str, dict]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _json(self, status: int, body: dict, headers: dict | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                hub.requests.append(("POST", self.path, dict(self.headers)))
                if self.headers.get("Authorization") != f"Bearer {hub.token}":
                    return self._json(401, {"error": "Invalid credentials in Authorization header"},
                                      {"X-Error-Message": "Invalid credentials in Authorization header"})
                path = self.path.split("?")[0]
                if path == "/api/repos/create":
                    req = json.loads(body)
                    key = f"{req.get('type', 'model')}s/{req['organization']}/{req['name']}"
                    if key in hub.repos:
                        # as the Hub does: the 409 names the existing repo's URL (create_repo(exist_ok=True) returns it)
                        return self._json(409, {"error": "You already created this dataset repo",
                                                "url": f"{hub.url}/{key}"})
                    hub.repos[key] = {"request": req, "files": {}, "commits": []}
                    return self._json(200, {"url": f"{hub.url}/{key}", "name": f"{req['organization']}/{req['name']}"})
                if path == "/api/validate-yaml":
                    req = json.loads(body)
                    text = req["content"]
                    errors = []
                    if not text.startswith("---\n"):
                        errors.append({"message": "no YAML front matter"})
                    else:
                        try:
                            meta = yaml.safe_load(text.split("---\n")[1])
                            if not isinstance(meta, dict) or "license" not in meta:
                                errors.append({"message": '"license" is required'})
                        except yaml.YAMLError as exc:
                            errors.append({"message": f"invalid YAML: {exc}"})
                    return self._json(400 if errors else 200, {"errors": errors, "warnings": []})
                parts = path.split("/")  # ['', 'api', 'datasets', ns, name, 'preupload'|'commit', rev]
                if len(parts) == 7 and parts[1] == "api" and parts[5] in ("preupload", "commit"):
                    key = "/".join(parts[2:5])
                    if key not in hub.repos:
                        return self._json(404, {"error": "Repository not found"},
                                          {"X-Error-Code": "RepoNotFound"})
                    repo = hub.repos[key]
                    if parts[5] == "preupload":
                        req = json.loads(body)
                        out = []
                        for f in req["files"]:
                            assert isinstance(f["size"], int) and base64.b64decode(f["sample"]) is not None
                            out.append({"path": f["path"], "uploadMode": "regular", "shouldIgnore": False})
                        return self._json(200, {"files": out, "commitOid": "0" * 40})
                    assert self.headers.get("Content-Type") == "application/x-ndjson"
                    lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
                    assert lines[0]["key"] == "header"
                    for item in lines[1:]:
                        if item["key"] != "file":
                            return self._json(400, {"error": f"stand-in: {item['key']} is not supported"})
                        repo["files"][item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                    oid = hashlib.sha1(body).hexdigest()
                    repo["commits"].append({"oid": oid, "summary": lines[0]["value"]["summary"]})
                    return self._json(200, {"commitUrl": f"{hub.url}/{key}/commit/{oid}", "commitOid": oid,
                                            "pullRequestUrl": None})
                return self._json(404, {"error": f"stand-in: {self.path} is not implemented"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def standin():
    hub = StandInHub()
    yield hub
    hub.stop()


@pytest.fixture
def spec_run(run_dir: Path) -> Path:
    """The conftest run, with the spec and hashes `agentsynth run` stores."""
    from agentsynth_kernel import RunStore

    store = RunStore(run_dir, create=False)
    store.set_meta("spec", {"pack": "kv", "split": "train", "policy": {"type": "llm", "model": "openai/gpt-4o-mini"},
                            "trials": 3, "seed": 0})
    store.set_meta("run_hash", "sha256:feedface")
    store.set_meta("versions", {"agentsynth": "0.1.0", "agentsynth-export": "0.1.0"})
    store.close()
    return run_dir


def push(tmp_path: Path, standin: StandInHub | None, *args: str, token: str | None = TOKEN):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_TOKEN")}
    env.update(HOME=str(tmp_path / "home"), HF_HOME=str(tmp_path / "home" / "hf"), HF_DATASETS_OFFLINE="1",
               LITELLM_LOCAL_MODEL_COST_MAP="True", AGENTSYNTH_LOAD_PLUGINS="export",
               HF_HUB_DISABLE_TELEMETRY="1")
    if standin is not None:
        env["HF_ENDPOINT"] = standin.url
    if token is not None:
        env["HF_TOKEN"] = token
    exe = Path(sys.executable).parent / "agentsynth"
    return subprocess.run([str(exe), "export", *args], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=180)


def load_as_the_hub_would(files: dict[str, bytes], where: Path):
    """The pushed repo's files on disk, loaded by `datasets.load_dataset`, which reads the card's configs."""
    import datasets

    for name, data in files.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_bytes(data)
    return datasets.load_dataset(str(where), split="train", cache_dir=str(where.parent / "ds-cache"))


def no_file_holds(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_push_creates_the_repo_and_commits_data_and_card(tmp_path, standin, spec_run):
    out = tmp_path / "out" / "sft.jsonl"
    r = push(tmp_path, standin, str(spec_run), "-f", "openai", "-o", str(out), "--push-to-hub", "acme/kv-sft",
             "--hub-license", "cc-by-4.0", "--hub-private", "--json")
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    summary = json.loads(r.stdout)
    assert summary["hub"]["repo"] == "acme/kv-sft" and summary["hub"]["url"].endswith("/datasets/acme/kv-sft")
    repo = standin.repos["datasets/acme/kv-sft"]
    assert repo["request"]["type"] == "dataset" and repo["request"]["visibility"] == "private"
    assert set(repo["files"]) == {"README.md", "data/sft.jsonl"}
    assert repo["files"]["data/sft.jsonl"] == out.read_bytes()  # the bytes exported are the bytes pushed
    assert summary["hub"]["commit"] == repo["commits"][0]["oid"]
    # every call carried the token from HF_TOKEN; which calls were made, in order
    calls = [p.split("?")[0] for _, p, _ in standin.requests]
    assert calls == ["/api/repos/create", "/api/validate-yaml", "/api/datasets/acme/kv-sft/preupload/main",
                     "/api/datasets/acme/kv-sft/commit/main"]
    card = repo["files"]["README.md"].decode()
    front = yaml.safe_load(card.split("---\n")[1])
    from agentsynth_export.common import _canary

    canary = _canary("sha256:abc")
    assert front["license"] == "cc-by-4.0"
    assert front["configs"][0]["data_files"][0] == {"split": "train", "path": "data/*.jsonl"}
    meta = front["agentsynth"]
    assert meta["pack"] == "kv" and meta["pack_hash"] == "sha256:abc" and meta["split"] == "train"
    assert meta["policy"] == "llm (openai/gpt-4o-mini)" and meta["run_hash"] == "sha256:feedface"
    assert (meta["episodes_passed"], meta["episodes_failed"], meta["episodes_error"]) == (3, 3, 1)
    assert meta["records"] == summary["written"] == 2  # passed, train split only
    assert meta["canary"] == canary and canary in card.split("## Canary")[1]
    assert "checked on the world's end state: 6 (3 passed, 3 failed); ended in an error: 1" in card
    assert "pass rate: 50.0%" in card and "test-split records left out" in card
    assert "agentsynth 0.1.0, agentsynth-export 0.1.0" in card
    ds = load_as_the_hub_would(repo["files"], tmp_path / "clone")
    assert ds.num_rows == 2 and "messages" in ds.column_names
    # the token went over the wire only: no file anywhere under the test's directories holds it
    assert no_file_holds(tmp_path, TOKEN) == []


def test_a_second_push_reuses_the_repo(tmp_path, standin, spec_run):
    for name in ("a.parquet", "b.parquet"):
        r = push(tmp_path, standin, str(spec_run), "-f", "parquet", "-o", str(tmp_path / name), "--filter", "all",
                 "--push-to-hub", "acme/kv")
        assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
        assert "pushed to " in r.stdout
    repo = standin.repos["datasets/acme/kv"]
    assert len(repo["commits"]) == 2 and {"data/a.parquet", "data/b.parquet"} <= set(repo["files"])
    assert repo["files"]["data/b.parquet"][:4] == b"PAR1"
    card = yaml.safe_load(repo["files"]["README.md"].decode().split("---\n")[1])
    assert card["license"] == "unknown"  # no --hub-license: stated as unknown, not made up


def test_a_directory_export_is_pushed_file_by_file(tmp_path, standin, spec_run):
    r = push(tmp_path, standin, str(spec_run), "-f", "hf", "-o", str(tmp_path / "hfds"), "--filter", "all",
             "--push-to-hub", "acme/kv-hf")
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    files = standin.repos["datasets/acme/kv-hf"]["files"]
    assert "data/dataset_info.json" in files and any(f.endswith(".arrow") for f in files)
    card = yaml.safe_load(files["README.md"].decode().split("---\n")[1])
    assert card["configs"][0]["data_files"][0]["path"] == "data/**/*.arrow"  # the shards, not the json state
    ds = load_as_the_hub_would(files, tmp_path / "clone")
    assert ds.num_rows == 5 and "record" in ds.column_names  # 7 episodes less the 2 of the test split


def test_a_wrong_token_is_a_clear_error(tmp_path, standin, spec_run):
    r = push(tmp_path, standin, str(spec_run), "-f", "openai", "-o", str(tmp_path / "x.jsonl"),
             "--push-to-hub", "acme/kv", token="hf_wrong")
    assert r.returncode != 0
    assert "--push-to-hub acme/kv:" in r.stderr and "401" in r.stderr
    assert "Traceback" not in r.stderr and not standin.repos


def test_no_token_fails_before_exporting(tmp_path, standin, spec_run):
    out = tmp_path / "x.jsonl"
    r = push(tmp_path, standin, str(spec_run), "-f", "openai", "-o", str(out), "--push-to-hub", "acme/kv",
             token=None)
    assert r.returncode != 0 and "HF_TOKEN is not set" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists() and standin.requests == []


@pytest.mark.parametrize(("args", "message"), [
    (["--push-to-hub", "not a repo"], "'not a repo' is not a repo id (expected NAMESPACE/NAME)"),
    (["--push-to-hub", "acme/kv", "--hub-license", "Apache 2"], "'Apache 2' is not a licence identifier"),
])
def test_bad_push_arguments(tmp_path, standin, spec_run, args, message):
    r = push(tmp_path, standin, str(spec_run), "-f", "openai", "-o", str(tmp_path / "x.jsonl"), *args)
    assert r.returncode != 0 and message in r.stderr and "Traceback" not in r.stderr
    assert standin.requests == []


def test_an_unreachable_hub(tmp_path, spec_run):
    gone = StandInHub()
    gone.stop()
    r = push(tmp_path, gone, str(spec_run), "-f", "openai", "-o", str(tmp_path / "x.jsonl"), "--push-to-hub",
             "acme/kv")
    assert r.returncode != 0 and "--push-to-hub acme/kv:" in r.stderr and "Traceback" not in r.stderr


def test_the_readme_push_example_runs(tmp_path, standin, spec_run):
    """The README's command, with the run directory swapped in, against the stand-in."""
    import re
    import shlex

    text = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Pushing to the Hugging Face Hub\n\n```bash\n(.*?)```", text, re.DOTALL).group(1)
    command = block.replace("\\\n", " ").splitlines()[1]
    assert command.startswith("agentsynth export runs/mine -f parquet")
    args = shlex.split(command.replace("[--hub-private]", "").replace("runs/mine", str(spec_run)))[2:]
    r = push(tmp_path, standin, *args, "--filter", "all")
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    assert re.search(r"wrote \d+ parquet records to out/train.parquet", r.stdout)
    assert f"pushed to {standin.url}/datasets/acme/shop-agent-sft (commit " in r.stdout
    card = standin.repos["datasets/acme/shop-agent-sft"]["files"]["README.md"].decode()
    assert card.startswith("---\nlicense: cc-by-4.0\n")
