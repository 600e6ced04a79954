"""``python -m agentsynth_kernel`` is the ``agentsynth`` command."""

import sys

from .cli import main

sys.exit(main())
