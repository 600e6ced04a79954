from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SUBSET = Path(__file__).parent / "data" / "bfcl"


def installed_data() -> Path | None:
    """The installed bfcl-eval's data directory (None when the package is not installed)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "data"
    return path if (path / "possible_answer").is_dir() else None


needs_bfcl_eval = pytest.mark.skipif(installed_data() is None,
                                     reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval)")


@pytest.fixture(autouse=True, scope="session")
def _bfcl_subset(tmp_path_factory):
    """Every test sees the real-BFCL subset shipped with the tests as the BFCL data, and builds its
    registered packs into a fresh cache."""
    from agentsynth_kernel import reset_plugins

    saved = {k: os.environ.get(k) for k in ("AGENTSYNTH_BFCL_DATA", "AGENTSYNTH_BFCL_CACHE")}
    os.environ["AGENTSYNTH_BFCL_DATA"] = str(SUBSET)
    os.environ["AGENTSYNTH_BFCL_CACHE"] = str(tmp_path_factory.mktemp("bfcl-cache"))
    reset_plugins()
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    reset_plugins()
