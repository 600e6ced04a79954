"""Every item of the installed bfcl-eval's data: the packs build, the oracle passes all of them and
the noop policy none of the call categories (skipped without the package)."""

from __future__ import annotations

import asyncio

import pytest

from agentsynth_bfcl.convert import CATEGORIES, write_pack
from agentsynth_kernel import ComponentSpec, RunSpec, execute, load_pack
from conftest import installed_data, needs_bfcl_eval


def rate(pack, policy: str) -> tuple[int, int]:
    spec = RunSpec(policy=ComponentSpec(policy), concurrency=8, timeout=30)
    results = asyncio.run(execute(spec, pack)).results
    return sum(r.passed for r in results), len(results)


@needs_bfcl_eval
@pytest.mark.parametrize("category", list(CATEGORIES))  # the groups only repeat these
def test_the_whole_category(category, tmp_path):
    pack = load_pack(write_pack(category, tmp_path / category, installed_data()))
    skipped = pack.metadata["skipped"]
    assert len(skipped) <= 3, skipped
    assert len(pack.tasks) >= 10
    passed, total = rate(pack, "oracle")
    assert passed == total, f"oracle: {passed}/{total}"
    if CATEGORIES[category].kind == "calls":
        assert rate(pack, "noop")[0] == 0
