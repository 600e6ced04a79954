"""The scripted solution of every task: `pack validate` checks it passes them all."""

ORACLE = {
    "add-call-bob": [{"tool": "add_note", "arguments": {"text": "call Bob"}}, {"answer": "added"}],
    "add-pay-rent": [{"tool": "add_note", "arguments": {"text": "pay rent"}}, {"answer": "added"}],
}
