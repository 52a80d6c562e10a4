"""The ``arithmetic`` kind for procedural.py: named numbers, then a worked solution.

Named numbers (and a few unused distractors) are defined at the start, filler follows, then a
question and a worked, step-by-step solution that refers back to the numbers by name, ending
"The answer is N." Every intermediate result is a whole number below 100,000 (divisions are
exact). ``arithmetic_layout`` returns the segments and gap weights that
``procedural_text.assemble_document`` turns into a document.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from procedural_text import Question

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


def arithmetic_layout(rng: random.Random, target_chars: int):
    """Segments and gap weights of an arithmetic document: definitions, filler, worked question."""
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
