"""Run a generator in a child process (killed by the kill tests): the notes world is registered here.

``synth_child.py PACK RUN_DIR PARAMS_JSON [GENERATOR]`` (default back_translation)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from agentsynth_kernel import get_host  # noqa: E402
from agentsynth_synth import run_generator  # noqa: E402
from conftest import _TestPlugin  # noqa: E402

if __name__ == "__main__":
    pack_dir, run_dir, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    name = sys.argv[4] if len(sys.argv) > 4 else "back_translation"
    get_host().add_plugin(_TestPlugin(), "synth-tests")
    run_generator(name, pack_dir, params, run_dir=run_dir, cache=False, concurrency=2)
