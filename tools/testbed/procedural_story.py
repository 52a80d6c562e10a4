"""The ``story_qa`` kind for procedural.py: a bAbI-style world of people, places and things.

A simulated little world is told one sentence at a time (the sentences end up separated by
filler), with questions that need one, two or three supporting facts: where a person is, where a
thing is, who has a thing, and where a thing was before a given place. ``story_qa_layout``
returns the segments and gap weights that ``procedural_text.assemble_document`` turns into a
document. The names and sentence templates are public: the tests parse stories with them.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from procedural_text import Question, Segment, inline_question, spread_weights

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
    return inline_question(f"Question: {question}", "Answer:", answer, task=task)


def story_qa_layout(rng: random.Random, target_chars: int):
    """Segments and gap weights of a story_qa document: placements, then events and questions."""
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

    gap_weights = [0.0] + spread_weights(rng, len(segments) - 1) + [0.0]
    return segments, gap_weights
