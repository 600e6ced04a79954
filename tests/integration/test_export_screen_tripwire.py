"""agentsynth-export's scrub screen was written against the kernel's redaction patterns: a tripwire.

The screen (a fast pre-check on encoded records, ``agentsynth_export.scrub``) must find everything
``agentsynth_kernel.secrets.redact_text`` masks. It reads the kernel's private patterns, so it lives
here, beside both (a plugin's own tests may import only the kernel's public names): when the kernel's
redaction changes, this fails and the screen is reviewed with it.
"""

from __future__ import annotations

import re

from agentsynth_export import scrub as scrub_mod
from agentsynth_export.scrub import SCREENED_PATTERNS
from agentsynth_kernel import secrets as ks


def test_the_kernel_patterns_are_those_the_screen_was_written_for():
    for name, pattern in SCREENED_PATTERNS.items():
        assert getattr(ks, name).pattern == pattern, f"agentsynth_kernel.secrets.{name} changed: review the screen"
    assert ks._SECRET_KEY.flags & re.IGNORECASE
    assert not ks._SECRET_VALUE.flags & re.IGNORECASE
    assert ks._MIN_SECRET == 6
    assert [m.lower().strip().encode() for m in ks._KEY_MARKERS if m != "Bearer "] == list(scrub_mod._MARKERS)
