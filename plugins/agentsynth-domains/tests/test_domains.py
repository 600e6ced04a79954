from fractions import Fraction

import pytest

from agentsynth_domains.domains import (
    DocsQADomain,
    MathDomain,
    chunk_text,
    final_answer,
    grounding,
    parse_fraction,
)
from agentsynth_kernel import AgentsynthError, Domain


@pytest.mark.parametrize("text, value", [
    ("3/4", Fraction(3, 4)), ("0.75", Fraction(3, 4)), ("1 1/2", Fraction(3, 2)), ("-2", Fraction(-2)),
    ("1,250", Fraction(1250)), ("$3.50", Fraction(7, 2)), ("75%", Fraction(3, 4)), ("12 apples", Fraction(12)),
    ("-1 1/4", Fraction(-5, 4)), (" 7/3. ", Fraction(7, 3)),
])
def test_exact_numbers(text, value):
    assert parse_fraction(text) == value


@pytest.mark.parametrize("text", ["many", "", "1/0", "three", None, True])
def test_not_numbers(text):
    assert parse_fraction(text) is None


def test_the_final_answer_line_wins_over_other_numbers():
    assert final_answer("2 + 3 = 5, then 5 * 3 = 15\nanswer: 1 1/2") == Fraction(3, 2)
    assert final_answer("First 4, then **Answer:** 0.25") == Fraction(1, 4)
    assert final_answer("so it is 42") == 42
    assert final_answer("I do not know") is None


def test_math_verifies_exact_fractions():
    d = MathDomain(count=3)
    assert isinstance(d, Domain) and d.acceptance == "verifiable"
    assert [i["id"] for i in d.items()] == ["math-0000", "math-0001", "math-0002"]
    c = {"problem": "A tank is filled by two pipes in some hours ...", "answer": "3/4"}
    assert d.validate(c) == []
    assert d.verify(c, "reasoning...\nanswer: 0.75") is True
    assert d.verify(c, "answer: 0.7") is False
    assert "answer: expected one exact number" in d.validate({"problem": "x" * 30, "answer": "many"})[0]
    assert d.validate({"problem": "short", "answer": "1"})[0].startswith("problem:")


def test_chunks_are_deterministic_and_overlap():
    text = " ".join(f"w{i}" for i in range(400))
    a, b = chunk_text(text, 200, 40), chunk_text(text, 200, 40)
    assert a == b and len(a) > 3
    assert all(len(c) <= 200 for c in a)
    assert a[0].split()[-1] in a[1].split()  # overlap
    assert " ".join(a).split()[-1] == "w399"


def test_docs_qa_items_are_grounded_chunks(tmp_path):
    (tmp_path / "a.md").write_text("The Zorblat river floods every spring. " * 20, encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("Copper conducts heat well and is used in pans. " * 30, encoding="utf-8")
    (tmp_path / "ignored.bin").write_bytes(b"\x00\x01")
    d = DocsQADomain(str(tmp_path), chunk_chars=400, overlap=50)
    items = list(d.items())
    assert {i["source"] for i in items} == {"a.md", "sub/b.txt"}
    assert [i["id"] for i in items] == [i["id"] for i in DocsQADomain(str(tmp_path), chunk_chars=400, overlap=50).items()]
    item = items[0]
    good = {"question": "When does it flood?", "answer": "The Zorblat river floods every spring",
            "rubric": [{"criterion": "Says spring", "weight": 2}], **item, "item": item["id"]}
    assert d.validate(good) == []
    ungrounded = {**good, "answer": "The Nile floods in August because of monsoon rains"}
    assert "not grounded in the excerpt" in d.validate(ungrounded)[0]
    capped = {**good, "rubric": [{"criterion": "Says spring", "weight": 10}]}
    assert "above the cap 3" in d.validate(capped)[0]
    negative = {**good, "rubric": [{"criterion": "Does not mention summer", "weight": 1},
                                   {"criterion": "Says spring", "weight": -1}]}
    problems = d.validate(negative)
    assert any("phrase it positively" in p for p in problems) and any("positive-only" in p for p in problems)
    assert grounding("spring floods", item["chunk"]) == 1.0


def test_docs_qa_bad_input_is_named(tmp_path):
    with pytest.raises(AgentsynthError, match="no such file or directory"):
        DocsQADomain(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(AgentsynthError, match="no .txt, .md"):
        DocsQADomain(str(tmp_path / "empty"))
    (tmp_path / "doc.pdf").write_bytes(b"%PDF-1.4 not really")
    d = DocsQADomain(str(tmp_path / "doc.pdf"))
    with pytest.raises(AgentsynthError, match=r"doc\.pdf: (reading PDF needs pypdf|not a readable PDF)"):
        list(d.items())
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 ".encode("latin-1") * 100)
    with pytest.raises(AgentsynthError, match="latin1.txt: not UTF-8"):
        list(DocsQADomain(str(tmp_path / "latin1.txt")).items())
