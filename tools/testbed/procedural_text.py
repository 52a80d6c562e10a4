"""Background text and document assembly for procedural.py.

* Fillers: ``simple_filler`` (simple English sentences from small word lists) and
  ``make_corpus_filler`` (random slices of real prose). A filler is any ``Filler``, i.e.
  ``Callable[[random.Random, int], str]`` returning about ``n_chars`` characters of background text
  (at most a sentence fewer is best; the shortfall is carried to the next gap).
* Assembly: a document kind lays out structured segments (plain strings and ``Question``s) and
  gap weights; ``assemble_document`` joins them with filler in the gaps and records where each
  question's evaluation prompt ends.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Union

Filler = Callable[[random.Random, int], str]

# ----------------------------------------------------------------------------------------------
# Built-in filler: simple English sentences from small word lists.
# Its vocabulary shares no word with the story world, has no digits, and never uses the phrasings
# of the questions, so the generated structure stays unambiguous (tests rely on that).
# ----------------------------------------------------------------------------------------------

_FILLER_DETERMINERS = ("The", "Every", "That", "This", "One", "Each")
_FILLER_NOUNS = (
    "farmer", "sailor", "teacher", "river", "mountain", "village", "cloud", "bird", "road",
    "bridge", "tree", "wind", "storm", "merchant", "painter", "child", "dog", "horse", "boat",
    "market", "forest", "field", "lake", "city", "song", "stone", "valley", "harbor", "train",
    "poet", "baker", "island", "meadow", "tower", "clock", "ship", "fox", "owl", "tailor",
)
_FILLER_ADJECTIVES = (
    "old", "quiet", "bright", "small", "distant", "busy", "gentle", "tired", "young", "heavy",
    "green", "cold", "warm", "narrow", "ancient", "patient", "curious", "silent", "proud", "lazy",
)
_FILLER_INTRANSITIVE = (
    "waited", "rested", "wandered", "slept", "shone", "sang", "paused", "listened", "laughed",
    "drifted", "vanished", "grew", "trembled", "smiled", "lingered", "hummed",
)
_FILLER_TRANSITIVE = (
    "watched", "followed", "painted", "remembered", "described", "admired", "crossed",
    "greeted", "noticed", "praised", "ignored", "imagined", "studied", "sketched",
)
_FILLER_ADVERBIALS = (
    "for a long time", "near the road", "after the rain", "before dawn", "without a sound",
    "all afternoon", "in the evening", "by the water", "under the stars", "at the edge of town",
    "once again", "with great care", "in the morning light", "during the long winter",
)
_FILLER_CONNECTIVES = ("because", "while", "although", "until", "as if")


def _filler_sentence(rng: random.Random) -> str:
    """One simple sentence from the filler word lists."""
    det = rng.choice(_FILLER_DETERMINERS)
    adj = rng.choice(_FILLER_ADJECTIVES)
    noun = rng.choice(_FILLER_NOUNS)
    other = rng.choice(_FILLER_NOUNS)
    form = rng.randrange(5)
    if form == 0:
        return f"{det} {adj} {noun} {rng.choice(_FILLER_INTRANSITIVE)} {rng.choice(_FILLER_ADVERBIALS)}."
    if form == 1:
        return f"{det} {noun} {rng.choice(_FILLER_TRANSITIVE)} the {adj} {other}."
    if form == 2:
        when = rng.choice(_FILLER_ADVERBIALS)
        return (f"{when[0].upper()}{when[1:]}, the {noun} {rng.choice(_FILLER_TRANSITIVE)} "
                f"the {other}.")
    if form == 3:
        return (f"{det} {noun} {rng.choice(_FILLER_INTRANSITIVE)} {rng.choice(_FILLER_CONNECTIVES)} "
                f"the {other} was {adj}.")
    return f"Nobody knew why the {adj} {noun} {rng.choice(_FILLER_INTRANSITIVE)} so often."


def _build_filler_pool(size: int = 4096, seed: int = 20_261_129) -> tuple[str, ...]:
    """A fixed pool of filler sentences, so the filler itself costs one `choices` call."""
    rng = random.Random(seed)
    return tuple(_filler_sentence(rng) for _ in range(size))


_FILLER_POOL = _build_filler_pool()
_FILLER_MEAN_LEN = sum(len(s) + 1 for s in _FILLER_POOL) / len(_FILLER_POOL)


def simple_filler(rng: random.Random, n_chars: int) -> str:
    """Simple English sentences, at most `n_chars` long and less than one sentence shorter.

    Returns "" when `n_chars` is shorter than a sentence.
    """
    if n_chars <= 0:
        return ""
    count = int(n_chars / _FILLER_MEAN_LEN) + 3
    text = " ".join(rng.choices(_FILLER_POOL, k=count))
    while len(text) < n_chars:
        text += " " + " ".join(rng.choices(_FILLER_POOL, k=count))
    if len(text) == n_chars:
        return text
    end = text.rfind(". ", 0, n_chars + 1)   # the last sentence that ends within n_chars
    return text[:end + 1] if end >= 0 else ""


def make_corpus_filler(corpus: str) -> Filler:
    """A filler that returns random slices of `corpus` (real prose), cut at sentence ends.

    A slice starts after a sentence end ("." then a space or newline) found in the first half of
    the window, else after a whitespace, and ends at the last sentence end that fits, else at a
    whitespace; it is at most `n_chars` long.
    """
    if len(corpus) < 2:
        raise ValueError("corpus is too short")

    def boundary_after(start: int, stop: int) -> int:
        """Index just past the first sentence end (or else whitespace) in [start, stop), or -1."""
        ends = [i for i in (corpus.find(". ", start, stop), corpus.find(".\n", start, stop)) if i >= 0]
        if ends:
            return min(ends) + 2
        spaces = [i for i in (corpus.find(" ", start, stop), corpus.find("\n", start, stop)) if i >= 0]
        return min(spaces) + 1 if spaces else -1

    def corpus_filler(rng: random.Random, n_chars: int) -> str:
        if n_chars <= 0:
            return ""
        n_chars = min(n_chars, len(corpus) - 1)
        start = rng.randrange(len(corpus) - n_chars)
        if start > 0:
            moved = boundary_after(start, start + n_chars // 2)
            start = moved if moved >= 0 else start
        piece = corpus[start:start + n_chars]
        end = max(piece.rfind(". "), piece.rfind(".\n"))
        if end >= 0:
            piece = piece[:end + 1]
        elif start + n_chars < len(corpus):
            piece = piece[:max(piece.rfind(" "), piece.rfind("\n"), 0)]
        return piece.strip()

    return corpus_filler


# ----------------------------------------------------------------------------------------------
# Document assembly: structured segments with filler in the gaps between them.
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Question:
    """A structured segment that asks a question and then answers it.

    `prompt_part` ends exactly where an evaluation prompt ends; `continuation` starts with
    whitespace and contains `answer` (right away, or after a worked solution for arithmetic).
    """
    prompt_part: str
    continuation: str
    answer: str
    task: str

    @property
    def text(self) -> str:
        return self.prompt_part + self.continuation


Segment = Union[str, Question]


@dataclass(frozen=True)
class AskedQuestion:
    """Where a question's evaluation prompt ends in the finished document."""
    prompt_end: int
    answer: str
    task: str


@dataclass(frozen=True)
class BuiltDocument:
    text: str
    questions: tuple[AskedQuestion, ...]


def _segment_text(segment: Segment) -> str:
    return segment.text if isinstance(segment, Question) else segment


_TOP_UP_CALLS = 4


def assemble_document(rng: random.Random, filler: Filler, segments: Sequence[Segment],
                      gap_weights: Sequence[float], target_chars: int) -> BuiltDocument:
    """Join `segments` with newlines, putting filler into the gaps to reach `target_chars`.

    `gap_weights[i]` is the share of the filler budget that goes before segment i
    (`gap_weights[-1]`: after the last segment); a weight of 0 means no filler there.
    """
    assert len(gap_weights) == len(segments) + 1
    structure_chars = sum(len(_segment_text(s)) for s in segments) + len(segments) - 1
    budget = target_chars - structure_chars
    total_weight = sum(gap_weights)

    parts: list[str] = []
    questions: list[AskedQuestion] = []
    length = 0
    carry = 0.0   # filler characters wanted but not yet delivered (passed on to the next gap)

    def append(text: str) -> None:
        nonlocal length
        if parts:
            parts.append("\n")
            length += 1
        parts.append(text)
        length += len(text)

    last_filled_gap = max((i for i, w in enumerate(gap_weights) if w > 0), default=-1)
    for i in range(len(segments) + 1):
        weight = gap_weights[i]
        if weight > 0 and budget > 0:
            carry += budget * weight / total_weight
            # The last gap has nowhere to pass a shortfall on to, so it asks again (a few times).
            for _ in range(_TOP_UP_CALLS if i == last_filled_gap else 1):
                # Each piece brings one newline with it: ask for one character less.
                piece = filler(rng, int(carry) - 1).strip() if carry >= 2 else ""
                if not piece:
                    break
                append(piece)
                carry -= len(piece) + 1
        if i == len(segments):
            break
        segment = segments[i]
        if isinstance(segment, Question):
            prompt_end = length + (1 if parts else 0) + len(segment.prompt_part)
            questions.append(AskedQuestion(prompt_end, segment.answer, segment.task))
        append(_segment_text(segment))

    return BuiltDocument("".join(parts), tuple(questions))


def inline_question(question: str, answer_lead: str, answer: str, task: str) -> Question:
    """`question answer_lead answer.` -- the answer follows right after `answer_lead`."""
    return Question(f"{question} {answer_lead}", f" {answer}.", answer, task)


def spread_weights(rng: random.Random, count: int) -> list[float]:
    """Random gap weights (uniform positions) for `count` gaps."""
    return [rng.random() + 0.02 for _ in range(count)]
