from __future__ import annotations

import pytest

from agentsynth_export.redact import Redactor
from agentsynth_kernel import ToolCall
from conftest import make_result


@pytest.mark.parametrize(
    ("text", "expected", "kind"),
    [
        ("write to jane.doe+tag@mail.example.co.uk now", "write to [EMAIL] now", "email"),
        ("key=sk-proj-abcDEF1234567890abcdef1234 ok", "key=[API_KEY] ok", "api_key"),
        ("anthropic sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv", "anthropic [API_KEY]", "api_key"),
        ("aws AKIAIOSFODNN7EXAMPLE here", "aws [API_KEY] here", "api_key"),
        ("gh ghp_0123456789abcdefghijABCDEFGHIJ0123456789 x", "gh [API_KEY] x", "api_key"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc-def_", "Authorization: Bearer [TOKEN]", "bearer"),
        ("call +1 415-555-0132 today", "call [PHONE] today", "phone"),
        ("call (415) 555-0132 today", "call [PHONE] today", "phone"),
        ("call 415.555.0132", "call [PHONE]", "phone"),
        ("ring +44 20 7946 0958.", "ring [PHONE].", "phone"),
        ("host 192.168.1.20:8080 up", "host [IP]:8080 up", "ip"),
        ("v6 2001:db8:85a3::8a2e:370:7334 and ::1", "v6 [IP] and [IP]", "ip"),
    ],
)
def test_each_kind_is_redacted_and_counted(text, expected, kind):
    r = Redactor()
    assert r.text(text) == expected
    assert r.counts[kind] >= 1
    assert sum(r.counts.values()) == expected.count("[")


@pytest.mark.parametrize(
    "text",
    [
        "version 1.2.3 released on 2024-01-15 at 10:30:00",
        "order id 12345678901 costs $1,234.56",
        "use std::vector<int> and a::b::c in C++",
        "the sku is ABC-123-4567 and the ratio 3.14159",
        "task-id 9f1c2e3d, hash sha256:abcdef0123456789",
        "skip the sk- prefix sk-short",
        "mac 00:1a:2b:3c:4d:5e is not an ip",
        "999.1.1.1 is not an address",
    ],
)
def test_ordinary_text_is_left_alone(text):
    r = Redactor()
    assert r.text(text) == text
    assert sum(r.counts.values()) == 0


def test_trajectory_everywhere_and_counts():
    t = make_result("t", 0, True, instruction="email ops@example.com from 10.0.0.7").trajectory
    t.steps[0] = type(t.steps[0])(ToolCall("send", {"to": ["ops@example.com"], "auth": "Bearer abcdefgh12345678"}, "id1"),
                                  t.steps[0].observation, 0, thought="token ghp_0123456789abcdefghijABCDEFGHIJ0123456789")
    t.metadata["contact"] = "+1 (415) 555-0132"
    r = Redactor()
    red = r.trajectory(t)
    assert red.instruction == "email [EMAIL] from [IP]"
    assert red.steps[0].action.arguments == {"to": ["[EMAIL]"], "auth": "Bearer [TOKEN]"}
    assert red.steps[0].action.id == "id1" and red.steps[0].thought == "token [API_KEY]"
    assert red.metadata["contact"] == "[PHONE]"
    assert r.report() == {"email": 2, "api_key": 1, "bearer": 1, "phone": 1, "ip": 1}
    assert t.instruction.startswith("email ops@")  # the original is untouched


def test_kinds_can_be_selected():
    r = Redactor(["email"])
    assert r.text("a@b.example 10.0.0.1") == "[EMAIL] 10.0.0.1"
    with pytest.raises(ValueError, match="unknown redaction kinds: ssn"):
        Redactor(["ssn"])
