"""A PII filter for accepted records: e-mail addresses, phone numbers and API-key-like strings.

Keys go through the kernel's redaction (``agentsynth_kernel.secrets.redact_text``: known secrets,
``sk-…``, ``AKIA…``, ``ghp_…``, ``Bearer …``); e-mails and phone numbers are matched here.
``mask`` replaces each hit with a placeholder, ``drop`` rejects the record, ``off`` does nothing.
"""

from __future__ import annotations

import re
from typing import Any

from agentsynth_kernel import REDACTED, redact_text

EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b")
# +1 415 555 0100, (415) 555-0100, 415-555-0100, +44 20 7946 0958: 9 to 15 digits with separators
PHONE = re.compile(r"(?<![\w/.])(?:\+\d{1,3}[\s.-]?)?"
                   r"(?:\(\d{2,4}\)[\s.-]?\d{2,4}(?:[\s.-]\d{2,4}){1,2}|\d{2,4}(?:[\s.-]\d{2,4}){2,3})(?![\w/])")


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{2}[./]\d{2}[./]\d{4}")


def _phone_like(match: re.Match[str]) -> bool:
    text = match.group(0)
    digits = sum(c.isdigit() for c in text)
    return 9 <= digits <= 15 and any(c in text for c in " .-()+") and not _DATE.search(text)


def scrub_text(text: str) -> tuple[str, list[str]]:
    """``text`` with PII masked, and the kinds found (``email``, ``phone``, ``secret``)."""
    found: list[str] = []

    def email(m: re.Match[str]) -> str:
        found.append("email")
        return "<email>"

    out = EMAIL.sub(email, text)

    def phone(m: re.Match[str]) -> str:
        if _phone_like(m):
            found.append("phone")
            return "<phone>"
        return m.group(0)

    out = PHONE.sub(phone, out)
    masked = redact_text(out)
    if masked != out:
        found.append("secret")
    return masked, found


def scrub(value: Any) -> tuple[Any, list[str]]:
    """A copy of plain data with every string scrubbed, and the kinds of PII found."""
    found: list[str] = []

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        if isinstance(item, str):
            text, kinds = scrub_text(item)
            found.extend(kinds)
            return text
        return item

    return walk(value), sorted(set(found))


__all__ = ["EMAIL", "PHONE", "REDACTED", "scrub", "scrub_text"]
