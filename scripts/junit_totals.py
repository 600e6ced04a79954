"""Sum the JUnit XML files that the nox test sessions wrote into one closing line."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(folder: str) -> int:
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    files = sorted(Path(folder).glob("*.xml"))
    for file in files:
        root = ET.parse(file).getroot()
        suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
        for suite in suites:
            for key in totals:
                totals[key] += int(suite.get(key, 0))
    failed = totals["failures"] + totals["errors"]
    passed = totals["tests"] - failed - totals["skipped"]
    print(f"{len(files)} test sessions")
    print(f"{passed} passed, {failed} failed, {totals['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ".ci-results"))
