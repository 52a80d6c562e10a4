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

Modules (each imported by plain ``import``; this folder must be on ``sys.path``):

* ``procedural.py``            -- this public entry point: the kinds, the training and evaluation
  streams, and the public names of the modules below.
* ``procedural_text.py``       -- fillers and document assembly (segments with filler in the gaps).
* ``procedural_retrieval.py``  -- ``kv_retrieval`` and ``needle``, keys and values, ``made_up_word``.
* ``procedural_story.py``      -- ``story_qa``: the story world and its questions.
* ``procedural_arithmetic.py`` -- ``arithmetic``: the chains of operations and worked solutions.

Everything is deterministic given the seed (only ``random.Random`` draws, no ``hash()``, no
iteration over sets; the same output on Python 3.11 to 3.13) and uses only the standard library.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence

import procedural_arithmetic
import procedural_retrieval
import procedural_story
from procedural_text import BuiltDocument, Filler, assemble_document, simple_filler

# The other public names of the modules above, so that callers need only `import procedural`.
from procedural_retrieval import made_up_word  # noqa: F401
from procedural_story import (  # noqa: F401 (the tests parse stories with these)
    PEOPLE, PLACES, STORY_DROP, STORY_GIVE, STORY_MOVE, STORY_PICK, STORY_PLACEMENT,
    STORY_QUESTIONS, THINGS, StoryWorld,
)
from procedural_text import AskedQuestion, Question, Segment, make_corpus_filler  # noqa: F401

# Module-private tables that test_procedural.py reads through this module (it parses documents
# with the same templates and checks filler lengths against the sentence pool).
from procedural_retrieval import _KV_HEADERS, _KV_QUERIES, _NEEDLE_FRAMES, _NEEDLE_TEMPLATES  # noqa: F401
from procedural_text import _FILLER_POOL  # noqa: F401

KINDS = ("kv_retrieval", "needle", "story_qa", "arithmetic")

# Training and evaluation streams draw from differently named seeds (string seeds are hashed
# with SHA-512 by random.Random, so these streams never coincide for any integer seed).
_TRAIN_SEED_PREFIX = "bifocal/procedural/train/"
_EVAL_SEED_PREFIX = "bifocal/procedural/eval/"


# ----------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------

_LAYOUTS = {
    "kv_retrieval": procedural_retrieval.kv_retrieval_layout,
    "needle": procedural_retrieval.needle_layout,
    "story_qa": procedural_story.story_qa_layout,
    "arithmetic": procedural_arithmetic.arithmetic_layout,
}


def build_document(rng: random.Random, kind: str, target_chars: int,
                   filler: Filler = simple_filler) -> BuiltDocument:
    """A document of `kind` of about `target_chars` characters, with where its questions are."""
    if kind not in _LAYOUTS:
        raise ValueError(f"unknown kind {kind!r}; expected one of {KINDS}")
    segments, gap_weights = _LAYOUTS[kind](rng, target_chars)
    return assemble_document(rng, filler, segments, gap_weights, target_chars)


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
