"""Scores over many samples per prompt (GEM's test-time scaling): GSM8K answer extraction,
majority voting @k and pass@k (the study's "best-of-N"), and best-of-n / mean-of-n reward."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import numpy as np

from reprolm.score.definitions import ANSWER_READINGS

ANSWER_MARKER = re.compile(r"the answer is", re.IGNORECASE)
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")
# The original evaluation's number pattern: at most one of ".,/" inside, so "1,250,000"
# matches "1,250".
ORIGINAL_NUMBER = re.compile(r"[\-+]?\d*[\.,/]?\d+")


def normalise_number(text: str) -> str | None:
    """A number's canonical text: thousands separators dropped, a fraction evaluated,
    "3.0" and "3" the same; None if it is not a finite number."""
    value = text.replace(",", "")
    try:
        number = Fraction(value) if "/" in value else Fraction(Decimal(value))
    except (ValueError, ZeroDivisionError, InvalidOperation):
        return None
    return str(number.numerator) if number.denominator == 1 else str(float(number))


def extract_answer(text: str, compat: str = "paper") -> str | None:
    """The first number after the last "The answer is" (any case): "The answer is: $1,250."
    gives "1250". ``compat: original`` reads it as the original GEM evaluation does."""
    ANSWER_READINGS.get(compat, "answer compat")
    if compat == "original":
        return original_answer(text)
    parts = ANSWER_MARKER.split(text)
    if len(parts) < 2:
        return None
    found = NUMBER.search(parts[-1])
    return normalise_number(found.group()) if found else None


def original_answer(text: str) -> str | None:
    """The original evaluation's answer: only "The answer is" and "the answer is" mark it;
    the first match of its number pattern after the last marker, commas dropped, as an
    integer rounded half to even (Python's ``round``): "3.5" gives "4", "2.5" gives "2",
    "1,250,000" gives "1250", "3/4" gives "1", "7/0" gives "7"; None where the original
    finds none or refuses a fraction whose parts are not numbers. Where its reading raises
    ("7/00" divides by zero, a 400-digit number overflows) the original's callers catch
    the error and count the answer as unparsed: None here too."""
    try:
        return _original_reading(text)
    except (ZeroDivisionError, OverflowError):
        return None


def _original_reading(text: str) -> str | None:
    parts = text.replace("the answer is", "The answer is").split("The answer is")
    if len(parts) < 2:
        return None
    found = ORIGINAL_NUMBER.search(parts[-1].strip())
    if not found:
        return None
    value = found.group()
    if "/" in value:
        numerator, denominator = value.split("/")
        if not (_is_number(numerator) and _is_number(denominator)):
            return None
        if denominator == "0":
            return str(round(float(numerator)))
        fraction = Fraction(value)
        return str(round(fraction.numerator / fraction.denominator))
    return str(round(float(value.replace(",", ""))))


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def voting_outcomes(
    answers: Sequence[Sequence[str | None]], references: Sequence[str], ks: Sequence[int], compat: str = "paper"
) -> dict[int, dict[str, list[bool]]]:
    """Per k, per prompt: whether majority voting among the first k samples is right
    (``maj``: the most common answer, ties to the earliest, is the reference) and whether
    the reference is among them (``pass``). An unparsed answer (None) casts no vote; with
    ``compat: original`` it is a vote like any other, as in the original code
    (``[None, None, 7, None, 5]`` elects None)."""
    ANSWER_READINGS.get(compat, "answer compat")
    outcomes = {}
    for k in ks:
        majority, passed = [], []
        for candidates, reference in zip(answers, references, strict=True):
            if len(candidates) < k:
                raise ValueError(f"@{k} needs {k} samples per prompt, got {len(candidates)}")
            first = list(candidates[:k]) if compat == "original" else [a for a in candidates[:k] if a is not None]
            counts = Counter(first)
            top = max(counts.values()) if counts else 0
            vote = next((a for a in first if counts[a] == top), None)
            majority.append(vote is not None and vote == reference)
            passed.append(reference in first)
        outcomes[k] = {"maj": majority, "pass": passed}
    return outcomes


def majority_and_pass_at_k(
    answers: Sequence[Sequence[str | None]], references: Sequence[str], ks: Sequence[int], compat: str = "paper"
) -> dict:
    """Per k, over prompts: maj@k and pass@k x 100 (see :func:`voting_outcomes`)."""
    return voting_percentages(voting_outcomes(answers, references, ks, compat))


def voting_percentages(outcomes: Mapping[int, Mapping[str, Sequence[bool]]]) -> dict:
    """Per k: the percentage of prompts voting right (``maj``) and passing (``pass``)."""
    return {
        k: {name: 100.0 * sum(hits) / len(hits) for name, hits in outcome.items()} for k, outcome in outcomes.items()
    }


def best_and_mean_per_prompt(rewards: Sequence[Sequence[float]], n: int) -> dict[str, list[float]]:
    """Per prompt: the best and the mean reward of its first n samples."""
    if any(len(r) < n for r in rewards):
        raise ValueError(f"best-of-{n} needs {n} samples per prompt")
    return {"best": [max(r[:n]) for r in rewards], "mean": [float(np.mean(r[:n])) for r in rewards]}


def best_and_mean_of_n(rewards: Sequence[Sequence[float]], ns: Sequence[int]) -> dict:
    """Per n, over prompts: the mean of the best and the mean of the first n samples' rewards."""
    return {
        n: {name: float(np.mean(values)) for name, values in best_and_mean_per_prompt(rewards, n).items()} for n in ns
    }


def samples_by_prompt(rows: Sequence[Mapping], value) -> dict:
    """``value(row)`` of each sample, grouped by prompt id in sample order."""
    grouped: dict = {}
    for row in sorted(rows, key=lambda r: (r["id"], r["sample"])):
        grouped.setdefault(row["id"], []).append(value(row))
    return grouped
