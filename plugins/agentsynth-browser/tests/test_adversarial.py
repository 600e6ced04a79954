"""The kernel's adversarial kit against the webshop pack: the generic exploits and the browser
world's own (``adversarial_exploits``), each in a fresh world in one shared Chromium."""

from __future__ import annotations

from collections import Counter

import pytest

from agentsynth_browser import launcher
from agentsynth_browser.exploits import BROWSER_EXPLOITS, CANARY, FAKEABLE
from agentsynth_kernel import load_pack
from agentsynth_kernel.testing.adversarial import GENERIC_EXPLOITS, assert_unfarmable, exploits_for


@pytest.fixture(autouse=True)
def _no_browser_left():
    """The kit plays episodes outside a run (no run_finished): close the shared browser after it, so
    the process census of the other tests starts from zero."""
    yield
    launcher.shutdown()


def test_the_plugin_contributes_its_exploits_for_browser_worlds_only():
    pack = load_pack("webshop")
    names = [e.name for e in exploits_for(pack)]
    browser = [n for n in names if n.startswith("browser.")]
    assert len(browser) == len(BROWSER_EXPLOITS) >= 8
    assert len(names) == len(GENERIC_EXPLOITS) + len(browser)
    from agentsynth_browser.plugin import adversarial_exploits

    assert adversarial_exploits(environment="sql") is None


def test_webshop_cannot_be_farmed_by_generic_or_browser_exploits():
    pack = load_pack("webshop")
    outcomes = assert_unfarmable(pack, timeout=30, concurrency=2)
    per_exploit = Counter(o.exploit for o in outcomes)
    assert set(per_exploit) == {e.name for e in exploits_for(pack)}
    assert per_exploit["generic.claim_success"] == len(pack.tasks)
    # the host-targeting attempts really ran, and the canary service never saw a request
    assert per_exploit["browser.loopback_service"] == per_exploit["browser.script_beacon"] == len(FAKEABLE)
    assert CANARY.port and CANARY.check() is None
    # refusals are clean failures, not infrastructure errors
    errors = [o.describe() for o in outcomes if o.status == "error"]
    assert errors == []
