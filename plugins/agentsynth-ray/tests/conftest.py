"""One real local Ray cluster for the whole test session (starting one costs 10-40 s here).

It is started by ``ray.init`` in this process, on the loopback address only (Ray otherwise binds the
node's outward address); drivers started as subprocesses (the CLI tests) join it through its GCS
address, and their actors die with them, as on a real cluster.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["RAY_DISABLE_USAGE_STATS"] = "1"
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # Ray's own switch: every address on 127.0.0.1
os.environ["AGENTSYNTH_LLM_CACHE"] = "off"
os.environ.setdefault("RAY_agent_register_timeout_ms", "300000")  # a slow dashboard agent is not fatal


@pytest.fixture(scope="session")
def ray_cluster():
    """The GCS address of a 2-CPU local cluster (this process is connected to it)."""
    import ray

    for attempt in range(3):  # on a loaded 2-core machine Ray's own 30 s start-up wait can run out
        try:
            ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                     object_store_memory=100 * 1024 * 1024, configure_logging=False)
            break
        except Exception:
            ray.shutdown()
            if attempt == 2:
                raise
    address = ray.get_runtime_context().gcs_address
    assert address.startswith("127.0.0.1:"), address
    yield address
    ray.shutdown()


@pytest.fixture
def cli_env(ray_cluster):
    """The environment for a subprocess driver that joins the test cluster."""
    return {**os.environ, "RAY_ADDRESS": ray_cluster, "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    """The agentsynth CLI in this process, from the tmp dir: cli("bench", ...) -> (code, out, err)."""
    from agentsynth_kernel.cli import main

    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str, str]:
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return int(code or 0), out, err

    return run
