"""Tests for procedural.py: determinism, correct answers (re-derived by parsing the text),
lengths, evaluation prompts, throughput.

Run from the repository root:  python3 -m unittest tools/testbed/test_procedural.py -v
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import re
import sys
import time
import unittest
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import procedural as P  # noqa: E402

TARGETS = (2000, 4000, 8000, 16000)


def template_regex(template: str, patterns: dict[str, str]) -> re.Pattern:
    """A regex matching `template` exactly; `{field}` becomes a named group (repeats must agree)."""
    regex = re.escape(template)
    for name, pattern in patterns.items():
        placeholder = re.escape("{" + name + "}")
        if placeholder not in regex:
            continue
        first = regex.index(placeholder)
        head, tail = regex[:first], regex[first + len(placeholder):]
        regex = head + f"(?P<{name}>{pattern})" + tail.replace(placeholder, f"(?P={name})")
    return re.compile(regex)


def answer_after(text: str, prompt_end: int) -> str:
    """The text after an inline question's prompt: whitespace, the answer, a period."""
    match = re.match(r"\s(\S+)\.(\n|$)", text[prompt_end:])
    assert match, f"no answer after prompt: {text[prompt_end:prompt_end + 60]!r}"
    return match.group(1)


# ----------------------------------------------------------------------------------------------
# Independent checkers: each parses a document and re-derives every answer in it.
# They return the list of (prompt_end, answer) pairs they verified.
# ----------------------------------------------------------------------------------------------

def check_kv_retrieval(test: unittest.TestCase, text: str) -> list[tuple[int, str]]:
    lines = text.split("\n")
    headers = [i for i, line in enumerate(lines) if line in P._KV_HEADERS]
    test.assertEqual(len(headers), 1)
    test.assertLessEqual(headers[0], 1, "the list comes first (after at most a little filler)")
    pair = re.compile(r"^(\S+?)(?::| =| ->) (\S+)$")
    table: dict[str, str] = {}
    for line in lines[headers[0] + 1:]:
        match = pair.match(line)
        if not match:
            break
        test.assertNotIn(match.group(1), table, "keys must be distinct")
        table[match.group(1)] = match.group(2)
    test.assertGreaterEqual(len(table), 4)
    test.assertEqual(len(set(table.values())), len(table), "values are distinct")

    queries = [template_regex(f"{q} {lead} ", {"key": r"\S+"}) for q, lead in P._KV_QUERIES]
    checked = []
    offset = 0
    for line in lines:
        for query in queries:
            match = query.match(line)
            if match:
                value = line[match.end():-1]
                test.assertTrue(line.endswith("."))
                test.assertEqual(value, table[match.group("key")])
                checked.append((offset + match.end() - 1, value))
        offset += len(line) + 1
    test.assertGreaterEqual(len(checked), 2)
    test.assertTrue(any(q.match(lines[-1]) for q in queries), "the document ends with a query")
    return checked


def needle_question_regex(question: str, lead: str, frame: str) -> re.Pattern:
    """A needle question in one wording and frame, up to the space before its answer."""
    return template_regex(frame.format(question=question) + f" {lead} ", {"key": r"\S+"})


def check_needle(test: unittest.TestCase, text: str) -> list[tuple[int, str]]:
    fields = {"key": r"\S+", "value": r"\S+"}
    for statement, wordings in P._NEEDLE_TEMPLATES:
        statement_re = template_regex(statement, fields)
        needles = {m.group("key"): m.group("value") for m in statement_re.finditer(text)}
        if needles:
            break
    test.assertTrue(needles, "no needle found")
    test.assertLessEqual(len(needles), 4)

    question_res = [needle_question_regex(question, lead, frame)
                    for question, lead in wordings for frame in P._NEEDLE_FRAMES]
    checked = []
    for question_re in question_res:
        for match in question_re.finditer(text):
            value = answer_after(text, match.end() - 1)
            test.assertEqual(value, needles[match.group("key")])
            checked.append((match.end() - 1, value))
    checked.sort()
    test.assertGreaterEqual(len(checked), 1)
    test.assertTrue(text.endswith(f" {checked[-1][1]}."))
    return checked


class ParsedWorld:
    """The test's own simulation of a story, driven by parsed sentences."""

    def __init__(self):
        self.person_at: dict[str, str] = {}
        self.thing_on_floor_at: dict[str, str] = {}   # things nobody holds
        self.carried_by: dict[str, str] = {}          # things somebody holds
        self.places_visited: dict[str, list[str]] = {}

    def where_is_thing(self, thing: str) -> str:
        if thing in self.carried_by:
            return self.person_at[self.carried_by[thing]]
        return self.thing_on_floor_at[thing]

    def note_place(self, thing: str) -> None:
        visited = self.places_visited.setdefault(thing, [])
        place = self.where_is_thing(thing)
        if not visited or visited[-1] != place:
            visited.append(place)


def check_story_qa(test: unittest.TestCase, text: str) -> list[tuple[int, str]]:
    names = "|".join(P.PEOPLE)
    fields = {"person": names, "other": names, "place": "|".join(P.PLACES),
              "thing": "|".join(P.THINGS)}
    sentence_kinds = [(kind, template_regex(t, fields)) for kind, templates in (
        ("placement", P.STORY_PLACEMENT), ("move", P.STORY_MOVE), ("pick", P.STORY_PICK),
        ("drop", P.STORY_DROP), ("give", P.STORY_GIVE)) for t in templates]
    question_kinds = [(task, template_regex(f"Question: {q} Answer: ", fields))
                      for task, q in P.STORY_QUESTIONS.items()]

    world = ParsedWorld()
    checked = []
    tasks = set()
    offset = 0
    for line in text.split("\n"):
        line_start, offset = offset, offset + len(line) + 1
        for kind, regex in sentence_kinds:
            match = regex.fullmatch(line)
            if match:
                break
        else:
            kind = None
        if kind is not None:
            g = match.groupdict()
            if kind == "placement":
                test.assertNotIn(g["thing"], world.thing_on_floor_at)
                world.thing_on_floor_at[g["thing"]] = g["place"]
                world.note_place(g["thing"])
            elif kind == "move":
                test.assertNotEqual(world.person_at.get(g["person"]), g["place"])
                world.person_at[g["person"]] = g["place"]
                for thing, holder in world.carried_by.items():
                    if holder == g["person"]:
                        world.note_place(thing)
            elif kind == "pick":
                test.assertNotIn(g["thing"], world.carried_by)
                test.assertEqual(world.person_at[g["person"]], world.thing_on_floor_at[g["thing"]])
                world.carried_by[g["thing"]] = g["person"]
            elif kind == "drop":
                test.assertEqual(world.carried_by.pop(g["thing"]), g["person"])
                world.thing_on_floor_at[g["thing"]] = world.person_at[g["person"]]
            elif kind == "give":
                test.assertEqual(world.carried_by[g["thing"]], g["person"])
                test.assertEqual(world.person_at[g["person"]], world.person_at[g["other"]])
                world.carried_by[g["thing"]] = g["other"]
            continue

        for task, regex in question_kinds:
            match = regex.match(line)
            if match:
                break
        else:
            test.assertIsNone(re.search(rf"\b({names})\b", line),
                              f"a line naming a person was not parsed: {line!r}")
            continue
        g = match.groupdict()
        if task == "person_place":
            expected = world.person_at[g["person"]]
        elif task == "thing_place":
            expected = world.where_is_thing(g["thing"])
        elif task == "thing_holder":
            expected = world.carried_by[g["thing"]]
        else:
            visited = world.places_visited[g["thing"]]
            test.assertEqual(visited.count(g["place"]), 1, "the question must be unambiguous")
            position = visited.index(g["place"])
            test.assertGreater(position, 0)
            expected = visited[position - 1]
        answer = answer_after(text, line_start + match.end() - 1)
        test.assertEqual(answer, expected, f"{line!r}")
        checked.append((line_start + match.end() - 1, answer))
        tasks.add(task)
    test.assertGreaterEqual(len(checked), 2)
    test.assertTrue(text.endswith(f" {checked[-1][1]}."))
    return checked


class ExpressionParser:
    """Recursive descent over + − × ÷ with the usual precedence, exact with Fractions."""

    def __init__(self, expression: str, values: dict[str, int]):
        self.tokens = re.findall(r"\d+|[a-z]|[+−×÷()]", expression)
        assert "".join(self.tokens) == expression.replace(" ", ""), expression
        self.values = values
        self.position = 0

    def parse(self) -> Fraction:
        value = self.sum()
        assert self.position == len(self.tokens)
        return value

    def peek(self):
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self):
        self.position += 1
        return self.tokens[self.position - 1]

    def sum(self) -> Fraction:
        value = self.product()
        while self.peek() in ("+", "−"):
            value = value + self.product() if self.take() == "+" else value - self.product()
        return value

    def product(self) -> Fraction:
        value = self.atom()
        while self.peek() in ("×", "÷"):
            value = value * self.atom() if self.take() == "×" else value / self.atom()
        return value

    def atom(self) -> Fraction:
        token = self.take()
        if token == "(":
            value = self.sum()
            assert self.take() == ")"
            return value
        return Fraction(int(token)) if token.isdigit() else Fraction(self.values[token])


def check_arithmetic(test: unittest.TestCase, text: str) -> list[tuple[int, str]]:
    question = re.search(r"^(?:Question: What is (?P<a>.+)\?|Problem: compute (?P<b>.+)\.)$",
                         text, re.M)
    test.assertIsNotNone(question)
    expression = question.group("a") or question.group("b")
    values = {m.group(1): int(m.group(2))
              for m in re.finditer(r"\b([a-z]) = (\d+)\b", text[:question.start()])}
    test.assertGreaterEqual(len(values), 3)
    used = set(re.findall(r"[a-z]", expression))
    test.assertTrue(used <= set(values))
    expected = ExpressionParser(expression, values).parse()
    test.assertEqual(expected.denominator, 1)

    solution = text[question.end():].strip().split("\n")
    test.assertEqual(solution[-1], f"The answer is {expected.numerator}.")
    steps = solution[:-1]
    test.assertTrue(2 <= len(steps) <= 6, steps)
    step_re = re.compile(r"^(?:First,|Then|Next,|After that,|Finally,) (\w+) ([+−×÷]) (\w+) = "
                         r"(\d+) \2 (\d+) = (\d+)\.$")
    previous = None
    for index, step in enumerate(steps):
        match = step_re.match(step)
        test.assertIsNotNone(match, step)
        shown_left, op, shown_right, left, right, result = match.groups()
        left, right, result = int(left), int(right), int(result)
        for shown, value in ((shown_left, left), (shown_right, right)):
            if shown.isdigit():   # an earlier result, written as its number
                test.assertEqual((int(shown), value), (previous, previous))
            else:
                test.assertEqual(values[shown], value)
        if index > 0:
            test.assertIn(str(previous), (shown_left, shown_right), "each step uses the last result")
        exact = {"+": Fraction(left + right), "−": Fraction(left - right),
                 "×": Fraction(left * right), "÷": Fraction(left, right)}[op]
        test.assertEqual(exact, result, step)
        test.assertGreater(result, 0)
        previous = result
    test.assertEqual(previous, expected)
    return [(question.end(), str(previous))]


CHECKERS = {"kv_retrieval": check_kv_retrieval, "needle": check_needle,
            "story_qa": check_story_qa, "arithmetic": check_arithmetic}


# ----------------------------------------------------------------------------------------------

class DeterminismTest(unittest.TestCase):
    def test_same_seed_same_stream(self):
        first = list(itertools.islice(P.mixed_documents(7), 20))
        again = list(itertools.islice(P.mixed_documents(7), 20))
        self.assertEqual(first, again)

    def test_different_seed_different_stream(self):
        first = list(itertools.islice(P.mixed_documents(7), 5))
        other = list(itertools.islice(P.mixed_documents(8), 5))
        for a, b in zip(first, other):
            self.assertNotEqual(a, b)

    def test_generate_document_depends_only_on_rng(self):
        for kind in P.KINDS:
            a = P.generate_document(random.Random(3), kind, 5000, P.simple_filler)
            b = P.generate_document(random.Random(3), kind, 5000, P.simple_filler)
            c = P.generate_document(random.Random(4), kind, 5000, P.simple_filler)
            self.assertEqual(a, b)
            self.assertNotEqual(a, c)

    def test_eval_problems_deterministic_and_held_out(self):
        for kind in P.KINDS:
            a = P.make_eval_problems(1, kind, 5, 4000, P.simple_filler)
            self.assertEqual(a, P.make_eval_problems(1, kind, 5, 4000, P.simple_filler))
            self.assertNotEqual(a, P.make_eval_problems(2, kind, 5, 4000, P.simple_filler))
        training = list(itertools.islice(P.mixed_documents(1, min_chars=4000, max_chars=4000), 200))
        prompts = [p["prompt"] for kind in P.KINDS
                   for p in P.make_eval_problems(1, kind, 10, 4000, P.simple_filler)]
        for document in training:
            self.assertFalse(any(document.startswith(p) for p in prompts))

    def test_golden_digest(self):
        """Fixed output for seed 0, so Python versions (3.11 here, 3.12 on the GPU machine) and
        later edits that change the stream are noticed. Update the digest when changing it on
        purpose."""
        text = "\x00".join(itertools.islice(P.mixed_documents(0), 40))
        digest = hashlib.sha256(text.encode()).hexdigest()
        self.assertEqual(digest, GOLDEN_DIGEST, "the seed-0 stream changed")


GOLDEN_DIGEST = "46e304869432f077c2a4afa666f227b80cb051b279e8094436bf54ad96a87d0a"  # Python 3.11 (3.12, 3.13: unchecked since the needle wordings)


class AnswersTest(unittest.TestCase):
    def test_every_kind_answers_correctly(self):
        rng = random.Random(11)
        for kind in P.KINDS:
            for target in TARGETS:
                for _ in range(40):
                    with self.subTest(kind=kind, target=target):
                        document = P.build_document(rng, kind, target, P.simple_filler)
                        checked = CHECKERS[kind](self, document.text)
                        recorded = [(q.prompt_end, q.answer) for q in document.questions]
                        self.assertEqual(checked, recorded)

    def test_answers_with_corpus_filler(self):
        corpus = P.simple_filler(random.Random(0), 200_000)
        filler = P.make_corpus_filler(corpus)
        rng = random.Random(12)
        for kind in P.KINDS:
            for _ in range(30):
                document = P.build_document(rng, kind, 8000, filler)
                CHECKERS[kind](self, document.text)
                self.assertLess(abs(len(document.text) - 8000), 100)

    def test_story_asks_every_question_type(self):
        rng = random.Random(5)
        tasks = {q.task for _ in range(100)
                 for q in P.build_document(rng, "story_qa", 8000).questions}
        self.assertEqual(tasks, set(P.STORY_QUESTIONS))

    def test_kv_queries_reach_far_back(self):
        rng = random.Random(6)
        longest = 0
        for _ in range(50):
            document = P.build_document(rng, "kv_retrieval", 16000)
            for question in document.questions:
                stated = document.text.index(f" {question.answer}\n")
                longest = max(longest, question.prompt_end - stated)
        self.assertGreater(longest, 10000)

    def test_arithmetic_uses_every_operation_and_step_count(self):
        rng = random.Random(8)
        ops, step_counts = set(), set()
        for _ in range(300):
            text = P.generate_document(rng, "arithmetic", 2000)
            question = re.search(r"^(Question|Problem): .*$", text, re.M)
            solution = text[question.end():].strip().split("\n")
            ops |= set(re.findall(r"[+−×÷]", "".join(solution)))
            step_counts.add(len(solution) - 1)
        self.assertEqual(ops, set("+−×÷"))
        self.assertEqual(step_counts, {2, 3, 4, 5, 6})


class LengthTest(unittest.TestCase):
    def test_target_lengths(self):
        rng = random.Random(21)
        for kind in P.KINDS:
            for target in TARGETS:
                lengths = [len(P.generate_document(rng, kind, target)) for _ in range(30)]
                with self.subTest(kind=kind, target=target):
                    self.assertLessEqual(max(lengths), target + 0.02 * target)
                    self.assertGreaterEqual(min(lengths), target - max(150, 0.03 * target))

    def test_mixed_lengths_in_range(self):
        for document in itertools.islice(P.mixed_documents(3, min_chars=3000, max_chars=6000), 100):
            self.assertTrue(2800 <= len(document) <= 6100, len(document))

    def test_simple_filler_length(self):
        rng = random.Random(0)
        longest_sentence = max(len(s) for s in P._FILLER_POOL)
        for n in (0, 10, 50, 100, 1000, 12345):
            text = P.simple_filler(rng, n)
            self.assertLessEqual(len(text), n)
            self.assertGreater(len(text), n - longest_sentence - 1)
            self.assertTrue(text == "" or text.endswith("."))
            self.assertIsNone(re.search(r"\d", text))


class NeedleWordingTest(unittest.TestCase):
    def test_every_wording_and_frame_is_asked(self):
        """Needle questions come in every wording of their template, framed and bare."""
        seen = set()
        for document in itertools.islice(P.mixed_documents(4, weights={"needle": 1}), 400):
            for t, (_, wordings) in enumerate(P._NEEDLE_TEMPLATES):
                for w, (question, lead) in enumerate(wordings):
                    for f, frame in enumerate(P._NEEDLE_FRAMES):
                        if needle_question_regex(question, lead, frame).search(document):
                            seen.add((t, w, f))
        every = {(t, w, f) for t, (_, wordings) in enumerate(P._NEEDLE_TEMPLATES)
                 for w in range(len(wordings)) for f in range(len(P._NEEDLE_FRAMES))}
        self.assertEqual(seen, every)


class WeightsTest(unittest.TestCase):
    def test_single_kind(self):
        for document in itertools.islice(P.mixed_documents(2, weights={"needle": 1}), 20):
            check_needle(self, document)

    def test_sequence_weights(self):
        for document in itertools.islice(P.mixed_documents(2, weights=[0, 0, 0, 1]), 20):
            check_arithmetic(self, document)

    def test_bad_weights(self):
        with self.assertRaises(ValueError):
            next(P.mixed_documents(0, weights={"poetry": 1}))
        with self.assertRaises(ValueError):
            next(P.mixed_documents(0, weights=[1, 2]))
        with self.assertRaises(ValueError):
            next(P.mixed_documents(0, weights=[0, 0, 0, 0]))
        with self.assertRaises(ValueError):
            P.generate_document(random.Random(0), "poetry", 1000, P.simple_filler)


class EvalProblemsTest(unittest.TestCase):
    def test_prompts_end_before_the_answer(self):
        for kind in P.KINDS:
            problems = P.make_eval_problems(4, kind, 25, 6000, P.simple_filler)
            # Rebuild the full documents from the same stream to see what followed each prompt.
            rng = random.Random(f"{P._EVAL_SEED_PREFIX}{kind}/4")
            for problem in problems:
                document = P.build_document(rng, kind, 6000, P.simple_filler).text
                prompt, answer = problem["prompt"], problem["answer"]
                with self.subTest(kind=kind):
                    self.assertEqual(problem["kind"], kind)
                    self.assertTrue(document.startswith(prompt))
                    self.assertEqual(prompt, prompt.rstrip())
                    self.assertGreater(len(prompt), 4000)
                    rest = document[len(prompt):]
                    if kind == "arithmetic":
                        self.assertTrue(prompt.endswith("?") or prompt.endswith("."))
                        self.assertNotIn(answer, prompt.rsplit("\n", 1)[-1])
                        self.assertTrue(rest.startswith("\nFirst, "))
                        self.assertTrue(rest.endswith(f"\nThe answer is {answer}."))
                    else:
                        self.assertEqual(rest, f" {answer}.")
                    checked = CHECKERS[kind](self, document)
                    self.assertEqual(checked[-1], (len(prompt), answer))

    def test_story_eval_tasks(self):
        problems = P.make_eval_problems(0, "story_qa", 60, 4000, P.simple_filler)
        self.assertEqual({p["task"] for p in problems}, set(P.STORY_QUESTIONS))


class ThroughputTest(unittest.TestCase):
    def measure(self, filler, seconds: float = 1.5) -> float:
        stream = P.mixed_documents(0, filler)
        produced = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            produced += len(next(stream).encode())
        return produced / (time.perf_counter() - start) / 1e6

    def test_throughput(self):
        builtin = self.measure(P.simple_filler)
        corpus = self.measure(P.make_corpus_filler(P.simple_filler(random.Random(1), 2_000_000)))
        print(f"\n  procedural throughput: {builtin:.1f} MB/s with simple_filler, "
              f"{corpus:.1f} MB/s with a corpus filler (one process, Python "
              f"{sys.version.split()[0]})", file=sys.stderr)
        self.assertGreater(builtin, 0.5)
        self.assertGreater(corpus, 0.5)


if __name__ == "__main__":
    unittest.main()
