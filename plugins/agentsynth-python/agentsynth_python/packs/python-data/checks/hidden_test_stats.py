"""Hidden check for fix-median (never in the agent's world): prints medians of inputs the agent
never saw; run with python -I so nothing of the world but stats.py is imported."""
import sys

sys.path.insert(0, "/world")
from stats import median  # noqa: E402

cases = [[9, 2, 7, 4], [1.5, -3.0], [8, 6, 7, 5, 3, 0, 9], [100, 1, 50, 2, 75, 3], [-4, -8]]
print(" ".join(repr(float(median(c))) for c in cases))
