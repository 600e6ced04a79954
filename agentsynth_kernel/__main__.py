"""``python -m agentsynth_kernel`` is the ``agentsynth`` command."""

from .cli import main

main()
