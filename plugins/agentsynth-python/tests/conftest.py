from __future__ import annotations

import os

import pytest

from agentsynth_python.sandbox import probe

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

needs_bwrap = pytest.mark.skipif(bool(probe()), reason=f"no bwrap sandbox here: {probe()}")
