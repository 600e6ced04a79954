"""The two shipped domains: ``math`` (word problems, exact-fraction answers, verifiable) and
``docs_qa`` (questions grounded in chunks of a folder of documents, rubric-scored).

A domain is a plain class satisfying :class:`agentsynth_kernel.Domain`; the loop only calls its
methods, so a user's domain (``agentsynth init-domain``) plugs in the same way.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path
from typing import Any

from agentsynth_kernel import AgentsynthError

# --- exact answers ---------------------------------------------------------------------------------

_MIXED = re.compile(r"^([+-]?\d+)\s+(\d+)\s*/\s*(\d+)$")
_NUMBER = re.compile(r"[+-]?\d[\d,]*(?:\.\d+)?(?:\s+\d+\s*/\s*\d+|\s*/\s*\d+)?|[+-]?\.\d+")
_ANSWER_LINE = re.compile(r"^\s*\**\s*(?:final\s+)?answer\s*\**\s*[:=]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def parse_fraction(text: Any) -> Fraction | None:
    """An exact number from ``3/4``, ``0.75``, ``1 1/2``, ``-2``, ``1,250``, ``$3.50``, ``75%``
    (a percentage is a number of hundredths); None when it is not one number."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return Fraction(str(text))
    if not isinstance(text, str):
        return None
    s = text.strip().rstrip(".").strip()
    s = re.sub(r"^\$|\\\(|\\\)|\\boxed\{|\}$", "", s).strip()
    percent = s.endswith("%")
    s = s.rstrip("%").replace(",", "").strip()
    s = re.sub(r"\s+[A-Za-z][A-Za-z ]*$", "", s)  # "12 apples" -> "12"
    try:
        mixed = _MIXED.match(s)
        if mixed:
            whole, num, den = (int(g) for g in mixed.groups())
            value = abs(whole) + Fraction(num, den)
            value = -value if mixed.group(1).startswith("-") else value
        else:
            value = Fraction(s.replace(" ", ""))
    except (ValueError, ZeroDivisionError):
        return None
    return value / 100 if percent else value


def final_answer(response: str) -> Fraction | None:
    """The number on the last ``answer: ...`` line of a response; without one, the last number."""
    lines = _ANSWER_LINE.findall(response or "")
    if lines:
        return parse_fraction(lines[-1])
    numbers = _NUMBER.findall(response or "")
    return parse_fraction(numbers[-1]) if numbers else None


# --- shared parsing --------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in an LLM answer (bare, fenced, or the outermost ``{...}``)."""
    text = text or ""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    start, end = text.find("{"), text.rfind("}")
    if start >= 0 and end > start:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate.strip())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise ValueError("the answer holds no JSON object")


def rubric_problems(candidate: dict[str, Any], max_weight: float) -> list[str]:
    """What is wrong with a candidate's ``rubric`` (a list of ``{criterion, weight}``): criteria
    are positive-only (a weight > 0, no "does not"/"penalise" phrasing) and weights are capped."""
    rubric = candidate.get("rubric")
    if not isinstance(rubric, list) or not rubric:
        return ["rubric: expected a non-empty list of {criterion, weight}"]
    problems = []
    for i, entry in enumerate(rubric):
        if not isinstance(entry, dict) or not isinstance(entry.get("criterion"), str) or not entry["criterion"].strip():
            problems.append(f"rubric[{i}].criterion: expected a non-empty string")
            continue
        weight = entry.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
            problems.append(f"rubric[{i}].weight: expected a positive number (criteria are positive-only), got {weight!r}")
        elif weight > max_weight:
            problems.append(f"rubric[{i}].weight: {weight} is above the cap {max_weight}")
        if re.match(r"\s*(does not|doesn't|must not|penali[sz]e|deduct|avoid)\b", entry["criterion"], re.IGNORECASE):
            problems.append(f"rubric[{i}].criterion: phrase it positively (what a good answer does), "
                            f"got {entry['criterion']!r}")
    return problems


JUDGE_FORMAT = ('Answer with JSON only: {"criteria": [{"index": 0, "met": true}, ...], "score": S, '
                '"rationale": "..."} where S is in [0, 1].')


def rubric_judge_prompt(question: str, reference: str, rubric: list[dict[str, Any]], response: str) -> str:
    lines = "\n".join(f"{i}. (weight {c.get('weight', 1)}) {c.get('criterion')}" for i, c in enumerate(rubric))
    return (f"Grade a response against a rubric.\n\nQuestion:\n{question}\n\nReference answer:\n{reference}\n\n"
            f"Rubric:\n{lines}\n\nResponse:\n{response}\n\n{JUDGE_FORMAT}")


# --- math ------------------------------------------------------------------------------------------

MATH_TOPICS = (
    "splitting a bill with a tip among friends", "mixing two solutions of different concentration",
    "two workers filling a tank at different rates", "a recipe scaled up by a fraction",
    "a discount followed by a sales tax", "average speed over a round trip",
    "sharing an inheritance in a given ratio", "a garden's area after a border is added",
    "compound growth over a few years", "the probability of drawing two matching socks",
    "a train catching up with another", "the remaining fraction of a pizza after several people eat",
)


class MathDomain:
    """Word problems whose answer is one exact number (checked as a ``Fraction``: ``3/4`` equals
    ``0.75``). The challenger writes ``{"problem", "answer"}``; solvers end with ``answer: ...``.

    ``topics``: seed topics (default: twelve built in); ``count``: how many items (cycling the
    topics); ``path``: a JSONL/text file of seed topics or problems, one per line.
    """

    acceptance = "verifiable"
    # optional (not in the kernel's protocol): the candidate's JSON Schema, sent as response_format
    # json_schema with json_mode (small local models then always write the right keys)
    candidate_schema = {"type": "object", "properties": {"problem": {"type": "string", "minLength": 20},
                                                         "answer": {"type": "string", "maxLength": 20}},
                        "required": ["problem", "answer"]}

    def __init__(self, count: int | None = None, topics: list[str] | None = None, path: str | None = None) -> None:
        if path is not None:
            file = Path(path)
            if not file.is_file():
                raise AgentsynthError(f"domain math: path: {path}: no such file")
            lines = [ln.strip() for ln in file.read_text(encoding="utf-8").splitlines() if ln.strip()]
            topics = [json.loads(ln).get("topic", ln) if ln.startswith("{") else ln for ln in lines]
        self.topics = list(topics or MATH_TOPICS)
        if not self.topics:
            raise AgentsynthError("domain math: topics: expected at least one topic")
        self.count = count if count is not None else len(self.topics)

    def items(self) -> Iterable[dict[str, Any]]:
        for i in range(self.count):
            yield {"id": f"math-{i:04d}", "topic": self.topics[i % len(self.topics)], "variant": i // len(self.topics)}

    def generation_prompt(self, item: dict[str, Any], feedback: str = "") -> str:
        prompt = (f"Write one challenging math word problem about {item['topic']} (variant {item.get('variant', 0)}). "
                  "It must need several steps of reasoning and have exactly one numeric answer (an integer, a "
                  "fraction like 7/3, or a terminating decimal).\n"
                  'Answer with JSON only: {"problem": "...", "answer": "..."}')
        if feedback:
            prompt += f"\n\nFeedback on your previous attempt (make the new problem better):\n{feedback}"
        return prompt

    def validate(self, candidate: dict[str, Any]) -> list[str]:
        problems = []
        if not isinstance(candidate.get("problem"), str) or len(candidate["problem"].strip()) < 20:
            problems.append("problem: expected the problem statement (a string of at least 20 characters)")
        if parse_fraction(candidate.get("answer")) is None:
            problems.append(f"answer: expected one exact number (3/4, 0.75, 1 1/2), got {candidate.get('answer')!r}")
        return problems

    def solver_prompt(self, candidate: dict[str, Any]) -> str:
        return (f"Solve this problem. Show your reasoning, then end with a final line 'answer: <number>'.\n\n"
                f"{candidate['problem']}")

    def audit_prompt(self, candidate: dict[str, Any]) -> str:
        return ("Check this math word problem for quality: it is well posed, unambiguous, has exactly one answer, "
                "and the stated answer is correct.\n\n"
                f"Problem:\n{candidate['problem']}\n\nStated answer: {candidate['answer']}\n\n"
                'Answer with JSON only: {"pass": true|false, "reason": "..."}')

    def judge_prompt(self, candidate: dict[str, Any], response: str) -> str:
        rubric = [{"criterion": f"The final answer equals {candidate['answer']}", "weight": 3},
                  {"criterion": "The reasoning is correct and complete", "weight": 1}]
        return rubric_judge_prompt(candidate["problem"], str(candidate["answer"]), rubric, response)

    def verify(self, candidate: dict[str, Any], response: str) -> bool | None:
        expected = parse_fraction(candidate.get("answer"))
        got = final_answer(response)
        if expected is None:
            return None
        return got is not None and got == expected


# --- documents -------------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the of to in on and or is are was were be by for with as at it its this that from".split())


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def grounding(answer: str, chunk: str) -> float:
    """The share of the answer's content words that occur in the chunk (1.0: fully grounded)."""
    words = content_words(answer)
    if not words:
        return 0.0
    vocabulary = set(content_words(chunk))
    return sum(w in vocabulary for w in words) / len(words)


def read_document(path: Path) -> str:
    if path.suffix.lower() == ".pdf":
        try:
            import pypdf
        except ImportError:
            raise AgentsynthError(f"domain docs_qa: {path}: reading PDF needs pypdf "
                                  "(pip install 'agentsynth-domains[pdf]'), or convert it to .txt") from None
        try:
            return "\n\n".join(page.extract_text() or "" for page in pypdf.PdfReader(str(path)).pages)
        except Exception as exc:
            raise AgentsynthError(f"domain docs_qa: {path}: not a readable PDF: {exc}") from None
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise AgentsynthError(f"domain docs_qa: {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def chunk_text(text: str, size: int, overlap: int) -> list[str]:
    """Deterministic chunks of about ``size`` characters, cut at paragraph then word boundaries,
    each starting ``overlap`` characters before the previous one ended."""
    words = text.split()
    chunks: list[str] = []
    start = 0
    while start < len(words):
        length, end = 0, start
        while end < len(words) and (length + len(words[end]) + 1 <= size or end == start):
            length += len(words[end]) + 1
            end += 1
        chunks.append(" ".join(words[start:end]))
        if end >= len(words):
            break
        back, k = 0, end
        while k > start + 1 and back + len(words[k - 1]) + 1 <= overlap:
            back += len(words[k - 1]) + 1
            k -= 1
        start = k
    return chunks


class DocsQADomain:
    """Questions grounded in a folder of ``.txt`` / ``.md`` (and ``.pdf`` with pypdf) files, cut
    into deterministic chunks; the challenger writes ``{"question", "answer", "rubric"}`` from one
    chunk, and the reference answer must be grounded in that chunk's text (``min_grounding`` of its
    content words occur there). Scored by a judge against the capped, positive-only rubric.
    """

    acceptance = "rubric"
    candidate_schema = {"type": "object", "required": ["question", "answer", "rubric"], "properties": {
        "question": {"type": "string"}, "answer": {"type": "string"},
        "rubric": {"type": "array", "minItems": 1, "maxItems": 5, "items": {
            "type": "object", "required": ["criterion", "weight"],
            "properties": {"criterion": {"type": "string"}, "weight": {"type": "integer", "minimum": 1, "maximum": 3}}}}}}
    SUFFIXES = (".txt", ".md", ".markdown", ".pdf")

    def __init__(self, path: str, chunk_chars: int = 1200, overlap: int = 150, min_chunk_chars: int = 200,
                 min_grounding: float = 0.6, max_weight: float = 3.0, limit: int | None = None) -> None:
        root = Path(path)
        if not root.exists():
            raise AgentsynthError(f"domain docs_qa: path: {path}: no such file or directory")
        if chunk_chars < 100 or not 0 <= overlap < chunk_chars:
            raise AgentsynthError("domain docs_qa: chunk_chars: expected >= 100 and 0 <= overlap < chunk_chars")
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix.lower() in self.SUFFIXES)
        if not files:
            raise AgentsynthError(f"domain docs_qa: path: {path}: no {', '.join(self.SUFFIXES)} files in it")
        self.root, self.files = root, files
        self.chunk_chars, self.overlap, self.min_chunk_chars = chunk_chars, overlap, min_chunk_chars
        self.min_grounding, self.max_weight, self.limit = min_grounding, max_weight, limit
        self._chunks: dict[str, str] = {}

    def items(self) -> Iterable[dict[str, Any]]:
        n = 0
        for file in self.files:
            name = file.name if self.root.is_file() else file.relative_to(self.root).as_posix()
            for i, chunk in enumerate(chunk_text(read_document(file), self.chunk_chars, self.overlap)):
                if len(chunk) < self.min_chunk_chars:
                    continue
                digest = hashlib.sha256(chunk.encode()).hexdigest()[:8]
                item = {"id": f"{name}#{i}-{digest}", "source": name, "chunk": chunk}
                self._chunks[item["id"]] = chunk
                yield item
                n += 1
                if self.limit is not None and n >= self.limit:
                    return

    def generation_prompt(self, item: dict[str, Any], feedback: str = "") -> str:
        prompt = (f"Here is an excerpt of {item['source']}:\n\n<excerpt>\n{item['chunk']}\n</excerpt>\n\n"
                  "Write one hard question that can be answered only from this excerpt (it needs several facts of "
                  "it combined), the reference answer in the excerpt's own words, and a grading rubric of 2-5 "
                  f"positive criteria with weights from 1 to {self.max_weight:g}.\n"
                  'Answer with JSON only: {"question": "...", "answer": "...", '
                  '"rubric": [{"criterion": "...", "weight": 1}]}')
        if feedback:
            prompt += f"\n\nFeedback on your previous attempt (make the new question better):\n{feedback}"
        return prompt

    def validate(self, candidate: dict[str, Any]) -> list[str]:
        problems = []
        for key in ("question", "answer"):
            if not isinstance(candidate.get(key), str) or not candidate[key].strip():
                problems.append(f"{key}: expected a non-empty string")
        problems += rubric_problems(candidate, self.max_weight)
        chunk = candidate.get("chunk") or self._chunks.get(str(candidate.get("item")), "")
        if not problems and chunk:
            share = grounding(candidate["answer"], chunk)
            if share < self.min_grounding:
                problems.append(f"answer: not grounded in the excerpt (only {share:.0%} of its content words occur "
                                f"there, need {self.min_grounding:.0%})")
        return problems

    def solver_prompt(self, candidate: dict[str, Any]) -> str:
        return (f"Read the excerpt and answer the question.\n\n<excerpt>\n{candidate['chunk']}\n</excerpt>\n\n"
                f"Question: {candidate['question']}")

    def audit_prompt(self, candidate: dict[str, Any]) -> str:
        return ("Check this question for quality: it is answerable from the excerpt alone, unambiguous, not "
                "trivial, and the reference answer is correct and complete.\n\n"
                f"<excerpt>\n{candidate['chunk']}\n</excerpt>\n\nQuestion: {candidate['question']}\n"
                f"Reference answer: {candidate['answer']}\n\n"
                'Answer with JSON only: {"pass": true|false, "reason": "..."}')

    def judge_prompt(self, candidate: dict[str, Any], response: str) -> str:
        return rubric_judge_prompt(candidate["question"], candidate["answer"], candidate["rubric"], response)

    def verify(self, candidate: dict[str, Any], response: str) -> bool | None:
        return None  # free text: the rubric judge decides
