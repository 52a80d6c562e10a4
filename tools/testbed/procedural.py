"""Procedural long-context documents for pretraining and evaluating the testbed model.

The testbed (a ~14M-parameter Qwen3-architecture model with a 4,096-token context) must learn to
*use* distant context, or the sequence mixers bifocal compares (sliding windows with and without
sinks, linear and mLSTM states, hybrids) cannot be told apart. This module writes documents in
which the answer to a question depends on facts stated thousands of tokens earlier, with natural
background text ("filler") in between. Answers are written out in the documents, so plain
next-token training teaches retrieval.

Document kinds (``KINDS``):

* ``kv_retrieval`` -- a list of key-value pairs near the start, filler, then queries
  ("What is the value of blorvin? The value of blorvin is 4829105.") spread over the rest.
* ``needle``       -- one to four "needle" sentences at random depths in filler, questions at the end.
* ``story_qa``     -- a simulated little world (people, places, things) told one sentence at a time,
  sentences separated by filler, with questions that need one, two or three supporting facts.
* ``arithmetic``   -- named numbers at the start, filler, then a question and a worked,
  step-by-step solution that refers back to the numbers by name, ending "The answer is N."

Public API:

* ``generate_document(rng, kind, target_chars, filler)`` -- one document as plain text.
* ``mixed_documents(seed, filler, weights, min_chars, max_chars)`` -- an endless training stream.
* ``make_eval_problems(seed, kind, n, target_chars, filler)`` -- held-out problems
  ``{"kind", "task", "prompt", "answer"}`` for exact-match evaluation.
* ``simple_filler`` (built-in background text) and ``make_corpus_filler`` (slices of real prose).

A filler is any ``Callable[[random.Random, int], str]`` returning about ``n_chars`` characters of
background text (at most a sentence fewer is best; the shortfall is carried to the next gap).

Everything is deterministic given the seed (only ``random.Random`` draws, no ``hash()``, no
iteration over sets; the same output on Python 3.11 to 3.13) and uses only the standard library.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Union

Filler = Callable[[random.Random, int], str]

KINDS = ("kv_retrieval", "needle", "story_qa", "arithmetic")

# Training and evaluation streams draw from differently named seeds (string seeds are hashed
# with SHA-512 by random.Random, so these streams never coincide for any integer seed).
_TRAIN_SEED_PREFIX = "bifocal/procedural/train/"
_EVAL_SEED_PREFIX = "bifocal/procedural/eval/"


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


def _assemble(rng: random.Random, filler: Filler, segments: Sequence[Segment],
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


def _inline_question(question: str, answer_lead: str, answer: str, task: str) -> Question:
    """`question answer_lead answer.` -- the answer follows right after `answer_lead`."""
    return Question(f"{question} {answer_lead}", f" {answer}.", answer, task)


# ----------------------------------------------------------------------------------------------
# Keys and values.
# ----------------------------------------------------------------------------------------------

_ONSETS = ("b", "bl", "br", "d", "dr", "f", "fl", "g", "gr", "k", "kl", "l", "m", "n", "p", "pr",
           "r", "s", "sk", "st", "t", "tr", "v", "z", "sh", "ch")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "ee", "oa")
_CODAS = ("", "", "", "n", "r", "l", "s", "m", "k", "th", "nd")
_ID_PREFIXES = ("key", "id", "item", "code", "ref")


def made_up_word(rng: random.Random) -> str:
    """A pronounceable made-up word such as 'blorvin' or 'traskeelu'."""
    syllables = rng.randint(2, 3)
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                   for _ in range(syllables))


def _id_key(rng: random.Random, prefix: str) -> str:
    return f"{prefix}-{rng.randrange(1000, 10000)}"


def _seven_digit_number(rng: random.Random) -> str:
    return str(rng.randrange(1_000_000, 10_000_000))


def _uuid_like(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _distinct(rng: random.Random, make: Callable[[random.Random], str], count: int) -> list[str]:
    """`count` distinct strings from `make`, in the order drawn."""
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        value = make(rng)
        if value not in seen:
            seen.add(value)
            out.append(value)
    return out


def _key_maker(rng: random.Random) -> Callable[[random.Random], str]:
    """Per document: made-up words or 'key-1234'-style ids."""
    if rng.random() < 0.5:
        return made_up_word
    prefix = rng.choice(_ID_PREFIXES)
    return lambda r: _id_key(r, prefix)


def _value_maker(rng: random.Random, uuid_share: float) -> Callable[[random.Random], str]:
    return _uuid_like if rng.random() < uuid_share else _seven_digit_number


def _spread_weights(rng: random.Random, count: int) -> list[float]:
    """Random gap weights (uniform positions) for `count` gaps."""
    return [rng.random() + 0.02 for _ in range(count)]


# ----------------------------------------------------------------------------------------------
# kv_retrieval
# ----------------------------------------------------------------------------------------------

_KV_HEADERS = (
    "Here is a list of keys and their values.",
    "Remember the following key-value pairs.",
    "The table below gives each key its value.",
    "Keys and values:",
)
_KV_LINE_FORMATS = ("{key}: {value}", "{key} = {value}", "{key} -> {value}")
_KV_QUERIES = (  # (question, answer lead)
    ("What is the value of {key}?", "The value of {key} is"),
    ("Which value belongs to {key}?", "The value that belongs to {key} is"),
    ("Look up {key} in the list.", "In the list, {key} has the value"),
)


def _kv_retrieval_layout(rng: random.Random, target_chars: int):
    make_key = _key_maker(rng)
    make_value = _value_maker(rng, uuid_share=0.3)
    line_format = rng.choice(_KV_LINE_FORMATS)
    probe_line = line_format.format(key=make_key(rng), value=make_value(rng))
    list_share = rng.uniform(0.08, 0.3)
    n_pairs = max(4, min(500, int(target_chars * list_share / (len(probe_line) + 1))))

    keys = _distinct(rng, make_key, n_pairs)
    values = _distinct(rng, make_value, n_pairs)
    lines = [rng.choice(_KV_HEADERS)]
    lines += [line_format.format(key=k, value=v) for k, v in zip(keys, values)]

    n_queries = min(n_pairs, rng.randint(2, 8))
    queries = []
    for index in rng.sample(range(n_pairs), n_queries):
        question, lead = rng.choice(_KV_QUERIES)
        key = keys[index]
        queries.append(_inline_question(question.format(key=key), lead.format(key=key),
                                        values[index], task="kv_retrieval"))

    segments = ["\n".join(lines)] + queries
    leading = rng.uniform(0, 0.05) if rng.random() < 0.3 else 0.0
    gap_weights = [leading] + _spread_weights(rng, n_queries) + [0.0]
    return segments, gap_weights


# ----------------------------------------------------------------------------------------------
# needle
# ----------------------------------------------------------------------------------------------

_NEEDLE_TEMPLATES = (  # (statement, question, answer lead)
    ("The special magic number for {key} is {value}.",
     "What is the special magic number for {key}?", "The special magic number for {key} is"),
    ("Remember this: the secret code of {key} is {value}.",
     "What is the secret code of {key}?", "The secret code of {key} is"),
    ("A hidden note says that the passcode for {key} is {value}.",
     "What passcode does the hidden note give for {key}?", "The passcode for {key} is"),
)
_NEEDLE_PREAMBLES = (
    "Some special values are hidden in the text below. Remember them.",
    "Read carefully: a few codes are hidden in the following text.",
)


def _needle_layout(rng: random.Random, target_chars: int):
    statement, question, lead = rng.choice(_NEEDLE_TEMPLATES)
    n_needles = rng.choice((1, 1, 2, 3, 4))
    keys = _distinct(rng, _key_maker(rng), n_needles)
    values = _distinct(rng, _value_maker(rng, uuid_share=0.2), n_needles)
    depths = sorted(rng.random() for _ in range(n_needles))

    segments: list[Segment] = []
    gap_weights: list[float] = [0.0]
    if rng.random() < 0.5:
        segments.append(rng.choice(_NEEDLE_PREAMBLES))
        gap_weights.append(0.0)
    previous_depth = 0.0
    for key, value, depth in zip(keys, values, depths):
        gap_weights[-1] = depth - previous_depth + 1e-3
        segments.append(statement.format(key=key, value=value))
        gap_weights.append(0.0)
        previous_depth = depth
    gap_weights[-1] = 1.0 - previous_depth + 1e-3

    asked = rng.sample(range(n_needles), rng.randint(1, n_needles))
    for index in asked:
        key = keys[index]
        segments.append(_inline_question(f"Question: {question.format(key=key)} Answer:",
                                         lead.format(key=key), values[index], task="needle"))
        gap_weights.append(0.0)
    return segments, gap_weights


# ----------------------------------------------------------------------------------------------
# story_qa: a simulated world of people, places and things.
# ----------------------------------------------------------------------------------------------

PEOPLE = ("Mary", "John", "Daniel", "Sandra", "Alice", "Omar", "Priya", "Lucas", "Mei", "Fatima",
          "Tom", "Elena", "Kofi", "Nina", "Hugo", "Yuki")
PLACES = ("kitchen", "garden", "hallway", "bedroom", "bathroom", "office", "attic", "cellar",
          "garage", "library", "balcony", "studio")
THINGS = ("apple", "football", "book", "umbrella", "hat", "cup", "candle", "scarf", "banana",
          "kite", "wallet", "hammer")

# Sentence templates; the tests parse stories with these same templates.
STORY_PLACEMENT = ("The {thing} is in the {place}.", "The {thing} lies in the {place}.")
STORY_MOVE = ("{person} went to the {place}.", "{person} walked to the {place}.",
              "{person} moved to the {place}.", "{person} ran to the {place}.",
              "{person} travelled to the {place}.", "{person} headed to the {place}.")
STORY_PICK = ("{person} picked up the {thing}.", "{person} took the {thing}.",
              "{person} grabbed the {thing}.")
STORY_DROP = ("{person} dropped the {thing}.", "{person} put down the {thing}.",
              "{person} left the {thing} there.")
STORY_GIVE = ("{person} gave the {thing} to {other}.", "{person} handed the {thing} to {other}.")
STORY_QUESTIONS = {  # task -> question template; every answer is a single word
    "person_place": "Where is {person}?",
    "thing_place": "Where is the {thing}?",
    "thing_holder": "Who has the {thing}?",
    "thing_previous_place": "Where was the {thing} before the {place}?",
}
_STORY_QUESTION_WEIGHTS = {"person_place": 2.0, "thing_place": 3.0, "thing_holder": 1.0,
                           "thing_previous_place": 3.0}
_STORY_PREAMBLES = (
    "A story is told below, one sentence at a time, among unrelated text.",
    "Follow the people and things in this story.",
)


class StoryWorld:
    """Where everyone and everything is; people's places are unknown until they first move."""

    def __init__(self, thing_places: Mapping[str, str]):
        self.person_place: dict[str, str] = {}
        self.holder: dict[str, str | None] = {t: None for t in thing_places}
        self.resting_place: dict[str, str] = dict(thing_places)   # used while nobody holds it
        self.history: dict[str, list[str]] = {t: [p] for t, p in thing_places.items()}

    def place_of_thing(self, thing: str) -> str:
        holder = self.holder[thing]
        return self.person_place[holder] if holder is not None else self.resting_place[thing]

    def move(self, person: str, place: str) -> None:
        self.person_place[person] = place
        for thing, holder in self.holder.items():
            if holder == person and self.history[thing][-1] != place:
                self.history[thing].append(place)

    def pick_up(self, person: str, thing: str) -> None:
        assert self.holder[thing] is None
        assert self.person_place[person] == self.resting_place[thing]
        self.holder[thing] = person

    def drop(self, person: str, thing: str) -> None:
        assert self.holder[thing] == person
        self.holder[thing] = None
        self.resting_place[thing] = self.person_place[person]

    def give(self, person: str, other: str, thing: str) -> None:
        assert self.holder[thing] == person
        assert self.person_place[person] == self.person_place[other]
        self.holder[thing] = other

    def previous_place_questions(self, thing: str) -> list[tuple[str, str]]:
        """(place, the place before it) for places the thing has been in exactly once."""
        history = self.history[thing]
        return [(history[i], history[i - 1]) for i in range(1, len(history))
                if history.count(history[i]) == 1]


def _story_event(rng: random.Random, world: StoryWorld, people: Sequence[str],
                 places: Sequence[str], things: Sequence[str]) -> str:
    """Choose a possible event, apply it to `world`, and return its sentence."""
    pickable = [(p, t) for t in things if world.holder[t] is None
                for p in people if world.person_place.get(p) == world.resting_place[t]]
    held = [(world.holder[t], t) for t in things if world.holder[t] is not None]
    givable = [(p, q, t) for p, t in held for q in people
               if q != p and world.person_place.get(q) == world.person_place[p]]
    actions = ["move"] + ["pick"] * bool(pickable) + ["drop"] * bool(held) + ["give"] * bool(givable)
    weights = {"move": 4.0, "pick": 3.0, "drop": 2.0, "give": 1.0}
    action = rng.choices(actions, weights=[weights[a] for a in actions])[0]

    if action == "pick":
        person, thing = rng.choice(pickable)
        world.pick_up(person, thing)
        return rng.choice(STORY_PICK).format(person=person, thing=thing)
    if action == "drop":
        person, thing = rng.choice(held)
        world.drop(person, thing)
        return rng.choice(STORY_DROP).format(person=person, thing=thing)
    if action == "give":
        person, other, thing = rng.choice(givable)
        world.give(person, other, thing)
        return rng.choice(STORY_GIVE).format(person=person, thing=thing, other=other)

    unplaced = [p for p in people if p not in world.person_place]
    person = rng.choice(unplaced) if unplaced and rng.random() < 0.6 else rng.choice(people)
    here = world.person_place.get(person)
    with_free_things = [world.resting_place[t] for t in things
                        if world.holder[t] is None and world.resting_place[t] != here]
    if with_free_things and rng.random() < 0.5:
        place = rng.choice(with_free_things)
    else:
        place = rng.choice([p for p in places if p != here])
    world.move(person, place)
    return rng.choice(STORY_MOVE).format(person=person, place=place)


def _story_question(rng: random.Random, world: StoryWorld, people: Sequence[str],
                    things: Sequence[str]) -> Question:
    """A question the current world state answers, of a randomly chosen answerable type."""
    placed = [p for p in people if p in world.person_place]
    held = [t for t in things if world.holder[t] is not None]
    previous = [(t, place, before) for t in things
                for place, before in world.previous_place_questions(t)]
    candidates = {"person_place": placed, "thing_place": list(things), "thing_holder": held,
                  "thing_previous_place": previous}
    tasks = [task for task, options in candidates.items() if options]
    task = rng.choices(tasks, weights=[_STORY_QUESTION_WEIGHTS[t] for t in tasks])[0]
    subject = rng.choice(candidates[task])
    template = STORY_QUESTIONS[task]

    if task == "person_place":
        question, answer = template.format(person=subject), world.person_place[subject]
    elif task == "thing_place":
        question, answer = template.format(thing=subject), world.place_of_thing(subject)
    elif task == "thing_holder":
        question, answer = template.format(thing=subject), world.holder[subject]
    else:
        thing, place, before = subject
        question, answer = template.format(thing=thing, place=place), before
    return _inline_question(f"Question: {question}", "Answer:", answer, task=task)


def _story_qa_layout(rng: random.Random, target_chars: int):
    people = rng.sample(PEOPLE, rng.randint(2, 5))
    places = rng.sample(PLACES, rng.randint(4, 7))
    things = rng.sample(THINGS, rng.randint(2, 5))
    thing_places = {t: rng.choice(places) for t in things}
    world = StoryWorld(thing_places)

    n_events = max(6, min(80, int(target_chars / rng.uniform(150, 500)), target_chars // 60))
    n_questions = rng.randint(2, 6)
    early_slots = range(2, n_events - 1)
    question_after = set(rng.sample(early_slots, min(n_questions - 1, len(early_slots))))
    question_after.add(n_events - 1)

    segments: list[Segment] = []
    if rng.random() < 0.4:
        segments.append(rng.choice(_STORY_PREAMBLES))
    segments += [rng.choice(STORY_PLACEMENT).format(thing=t, place=p)
                 for t, p in thing_places.items()]
    for event_index in range(n_events):
        segments.append(_story_event(rng, world, people, places, things))
        if event_index in question_after:
            segments.append(_story_question(rng, world, people, things))

    gap_weights = [0.0] + _spread_weights(rng, len(segments) - 1) + [0.0]
    return segments, gap_weights


# ----------------------------------------------------------------------------------------------
# arithmetic: named numbers at the start, a worked solution at the end.
# ----------------------------------------------------------------------------------------------

_VARIABLE_NAMES = "abcdefghjkmnpqrstuvwxyz"   # no i, l, o (easily confused with digits)
_ARITHMETIC_LIMIT = 100_000                    # every intermediate result stays below this
_PRECEDENCE = {"+": 1, "−": 1, "×": 2, "÷": 2}
_ATOM = 3
_OP_WEIGHTS = {"+": 3.0, "−": 3.0, "×": 2.0, "÷": 2.0}
_STEP_LEADS_MIDDLE = ("Then", "Next,", "After that,")


@dataclass(frozen=True)
class _Operand:
    shown: str        # how a step names it: a variable name, or the number an earlier step gave
    value: int
    expression: str  # how the question writes it
    precedence: int


@dataclass(frozen=True)
class _Step:
    left: _Operand
    op: str
    right: _Operand
    result: int


def _apply(op: str, left: int, right: int) -> int:
    if op == "+":
        return left + right
    if op == "−":
        return left - right
    if op == "×":
        return left * right
    assert right != 0 and left % right == 0, "division must be exact"
    return left // right


def _combined_expression(left: _Operand, op: str, right: _Operand) -> tuple[str, int]:
    """`left op right` with the fewest parentheses that keep the order of the steps."""
    precedence = _PRECEDENCE[op]
    left_text = left.expression if left.precedence >= precedence else f"({left.expression})"
    right_needs_parens = (right.precedence < precedence
                          or (right.precedence == precedence and op in "−÷"))
    right_text = f"({right.expression})" if right_needs_parens else right.expression
    return f"{left_text} {op} {right_text}", precedence


def _next_operation(rng: random.Random, current: int) -> tuple[str, int, bool]:
    """(op, new operand value, whether the running result is the left operand)."""
    room = _ARITHMETIC_LIMIT - 1 - current   # how far above `current` a value may go
    options: list[tuple[str, int, bool]] = []
    if room >= 2:
        options.append(("+", rng.randint(2, min(999, room)), True))
    if current >= 3:
        options.append(("−", rng.randint(1, current - 1), True))
    if room >= 1:
        options.append(("−", current + rng.randint(1, min(999, room)), False))
    if current * 2 < _ARITHMETIC_LIMIT:
        options.append(("×", rng.randint(2, min(25, (_ARITHMETIC_LIMIT - 1) // current)), True))
    divisors = [d for d in range(2, min(current // 2, 50) + 1) if current % d == 0]
    if divisors:
        options.append(("÷", rng.choice(divisors), True))
    if 2 <= current and current * 2 < _ARITHMETIC_LIMIT:
        options.append(("÷", current * rng.randint(2, min(12, (_ARITHMETIC_LIMIT - 1) // current)),
                        False))
    return rng.choices(options, weights=[_OP_WEIGHTS[o[0]] for o in options])[0]


def _arithmetic_steps(rng: random.Random, names: Sequence[str]) -> tuple[list[_Step], dict[str, int]]:
    """A chain of len(names) - 1 steps, each bringing in the next named number."""
    first_value = rng.choice((rng.randint(2, 99), rng.randint(2, 999)))
    values = {names[0]: first_value}
    running = _Operand(names[0], first_value, names[0], _ATOM)
    steps: list[_Step] = []
    for name in names[1:]:
        op, value, running_on_left = _next_operation(rng, running.value)
        values[name] = value
        variable = _Operand(name, value, name, _ATOM)
        left, right = (running, variable) if running_on_left else (variable, running)
        result = _apply(op, left.value, right.value)
        steps.append(_Step(left, op, right, result))
        expression, precedence = _combined_expression(left, op, right)
        running = _Operand(str(result), result, expression, precedence)
    return steps, values


def _step_sentence(step: _Step, lead: str) -> str:
    return (f"{lead} {step.left.shown} {step.op} {step.right.shown} = "
            f"{step.left.value} {step.op} {step.right.value} = {step.result}.")


def _step_leads(n_steps: int) -> list[str]:
    if n_steps == 1:
        return ["First,"]
    middle = [_STEP_LEADS_MIDDLE[i % len(_STEP_LEADS_MIDDLE)] for i in range(n_steps - 2)]
    return ["First,"] + middle + ["Finally,"]


def _definitions_text(rng: random.Random, values: Mapping[str, int]) -> str:
    pairs = [f"{name} = {value}" for name, value in values.items()]
    listed = ", ".join(pairs[:-1]) + f" and {pairs[-1]}"
    style = rng.randrange(3)
    if style == 0:
        return f"Let {listed}."
    if style == 1:
        return f"We are given the numbers {listed}."
    return "Given:\n" + "\n".join(pairs)


def _arithmetic_layout(rng: random.Random, target_chars: int):
    n_steps = rng.randint(2, 6)
    n_distractors = rng.randint(0, 3)
    names = rng.sample(_VARIABLE_NAMES, n_steps + 1 + n_distractors)
    steps, values = _arithmetic_steps(rng, names[:n_steps + 1])
    for name in names[n_steps + 1:]:
        values[name] = rng.randint(2, 999)
    defined = list(values.items())
    rng.shuffle(defined)

    final = steps[-1]
    expression, _ = _combined_expression(final.left, final.op, final.right)
    question = rng.choice(("Question: What is {e}?", "Problem: compute {e}.")).format(e=expression)
    solution = [_step_sentence(s, lead) for s, lead in zip(steps, _step_leads(n_steps))]
    solution.append(f"The answer is {final.result}.")
    worked = Question(question, "\n" + "\n".join(solution), str(final.result), task="arithmetic")

    segments = [_definitions_text(rng, dict(defined)), worked]
    return segments, [0.0, 1.0, 0.0]


# ----------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------

_LAYOUTS = {
    "kv_retrieval": _kv_retrieval_layout,
    "needle": _needle_layout,
    "story_qa": _story_qa_layout,
    "arithmetic": _arithmetic_layout,
}


def build_document(rng: random.Random, kind: str, target_chars: int,
                   filler: Filler = simple_filler) -> BuiltDocument:
    """A document of `kind` of about `target_chars` characters, with where its questions are."""
    if kind not in _LAYOUTS:
        raise ValueError(f"unknown kind {kind!r}; expected one of {KINDS}")
    segments, gap_weights = _LAYOUTS[kind](rng, target_chars)
    return _assemble(rng, filler, segments, gap_weights, target_chars)


def generate_document(rng: random.Random, kind: str, target_chars: int,
                      filler: Filler = simple_filler) -> str:
    """One document of `kind` (see KINDS) as plain text of about `target_chars` characters.

    Every document ends with its last answer. Very small targets give documents longer than
    the target (the structure alone does not fit).
    """
    return build_document(rng, kind, target_chars, filler).text


def _kind_weights(weights: Mapping[str, float] | Sequence[float] | None) -> list[float]:
    if weights is None:
        return [1.0] * len(KINDS)
    if isinstance(weights, Mapping):
        unknown = set(weights) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown kinds in weights: {sorted(unknown)}")
        result = [float(weights.get(kind, 0.0)) for kind in KINDS]
    else:
        result = [float(w) for w in weights]
        if len(result) != len(KINDS):
            raise ValueError(f"weights needs {len(KINDS)} entries, one per kind in KINDS")
    if any(w < 0 for w in result) or sum(result) <= 0:
        raise ValueError("weights must be non-negative and not all zero")
    return result


def mixed_documents(seed: int, filler: Filler = simple_filler,
                    weights: Mapping[str, float] | Sequence[float] | None = None,
                    min_chars: int = 2000, max_chars: int = 16000) -> Iterator[str]:
    """An endless stream of training documents, kinds drawn by `weights` (default: equal).

    `weights` is a mapping kind -> weight or a sequence aligned with KINDS. Lengths are drawn
    uniformly from [min_chars, max_chars]. Give each data-loading process its own seed.
    """
    kind_weights = _kind_weights(weights)
    rng = random.Random(f"{_TRAIN_SEED_PREFIX}{seed}")
    while True:
        kind = rng.choices(KINDS, weights=kind_weights)[0]
        target_chars = rng.randint(min_chars, max_chars)
        yield generate_document(rng, kind, target_chars, filler)


def make_eval_problems(seed: int, kind: str, n: int, target_chars: int,
                       filler: Filler = simple_filler) -> list[dict]:
    """`n` held-out problems {"kind", "task", "prompt", "answer"} of about `target_chars` chars.

    Each problem is a document cut at its last question: `prompt` ends right before the answer
    (never in whitespace) and the document went on with whitespace and then `answer`. For
    `arithmetic` the prompt ends with the question, before the worked solution; the model is
    expected to write the steps and "The answer is N.", and `answer` is N. `task` names the
    question type (for story_qa: person_place, thing_place, thing_holder, thing_previous_place).
    The random stream differs from every `mixed_documents` stream.
    """
    rng = random.Random(f"{_EVAL_SEED_PREFIX}{kind}/{seed}")
    problems = []
    for _ in range(n):
        document = build_document(rng, kind, target_chars, filler)
        last = document.questions[-1]
        problems.append({"kind": kind, "task": last.task,
                         "prompt": document.text[:last.prompt_end], "answer": last.answer})
    return problems


if __name__ == "__main__":
    example_rng = random.Random(0)
    for example_kind in KINDS:
        print(f"===== {example_kind}")
        print(generate_document(example_rng, example_kind, 2500))
        print()
