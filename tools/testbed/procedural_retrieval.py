"""Retrieval kinds for procedural.py: ``kv_retrieval`` and ``needle``.

* ``kv_retrieval`` -- a list of key-value pairs near the start, filler, then queries
  ("What is the value of blorvin? The value of blorvin is 4829105.") spread over the rest.
* ``needle``       -- one to four "needle" sentences at random depths in filler, questions at the end
  (each in one of several wordings, with or without a "Question: … Answer:" frame).

Keys are made-up words (``made_up_word``) or 'key-1234'-style ids; values are 7-digit numbers or
UUID-like strings. Each ``*_layout`` function returns the segments and gap weights that
``procedural_text.assemble_document`` turns into a document.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from procedural_text import Segment, inline_question, spread_weights


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


def kv_retrieval_layout(rng: random.Random, target_chars: int):
    """Segments and gap weights of a kv_retrieval document: the list first, queries spread out."""
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
        queries.append(inline_question(question.format(key=key), lead.format(key=key),
                                       values[index], task="kv_retrieval"))

    segments = ["\n".join(lines)] + queries
    leading = rng.uniform(0, 0.05) if rng.random() < 0.3 else 0.0
    gap_weights = [leading] + spread_weights(rng, n_queries) + [0.0]
    return segments, gap_weights


# ----------------------------------------------------------------------------------------------
# needle
# ----------------------------------------------------------------------------------------------

# (statement, ((question, answer lead), ...)): the first pair is the plain one; the others ask the
# same in other words, so that the model learns to retrieve whatever the wording of the question
# (a 14 M-parameter model trained on one wording answers a paraphrase with prose).
_NEEDLE_TEMPLATES = (
    ("The special magic number for {key} is {value}.",
     (("What is the special magic number for {key}?", "The special magic number for {key} is"),
      ("Which special magic number does the text give for {key}?",
       "The special magic number the text gives for {key} is"),
      ("What was the special magic number for {key} in the passage?",
       "In the passage, the special magic number for {key} was"),
      ("Recall the special magic number for {key} that appeared earlier.",
       "The special magic number for {key} that appeared earlier is"))),
    ("Remember this: the secret code of {key} is {value}.",
     (("What is the secret code of {key}?", "The secret code of {key} is"),
      ("Which secret code was given for {key}?", "The secret code given for {key} is"))),
    ("A hidden note says that the passcode for {key} is {value}.",
     (("What passcode does the hidden note give for {key}?", "The passcode for {key} is"),
      ("According to the hidden note, what is the passcode for {key}?",
       "According to the hidden note, the passcode for {key} is"))),
)
# How a question is framed: "Question: … Answer: lead value." or the question and lead alone.
_NEEDLE_FRAMES = ("Question: {question} Answer:", "{question}")
_NEEDLE_PREAMBLES = (
    "Some special values are hidden in the text below. Remember them.",
    "Read carefully: a few codes are hidden in the following text.",
)


def needle_layout(rng: random.Random, target_chars: int):
    """Segments and gap weights of a needle document: needles at random depths, questions last."""
    statement, wordings = rng.choice(_NEEDLE_TEMPLATES)
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
        question, lead = rng.choice(wordings)
        frame = rng.choice(_NEEDLE_FRAMES)
        segments.append(inline_question(frame.format(question=question.format(key=key)),
                                        lead.format(key=key), values[index], task="needle"))
        gap_weights.append(0.0)
    return segments, gap_weights

