"""Run back_translation in a child process (killed by test_kill.py): the notes world is registered here."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from agentsynth_kernel import get_host  # noqa: E402
from agentsynth_synth import run_generator  # noqa: E402
from conftest import _TestPlugin  # noqa: E402

if __name__ == "__main__":
    pack_dir, run_dir, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    get_host().add_plugin(_TestPlugin(), "synth-tests")
    run_generator("back_translation", pack_dir, params, run_dir=run_dir, cache=False, concurrency=2)
