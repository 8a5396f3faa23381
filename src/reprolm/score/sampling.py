"""Scores over many samples per prompt (GEM's test-time scaling): GSM8K answer extraction,
majority voting @k and pass@k (the study's "best-of-N"), and best-of-n / mean-of-n reward."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import numpy as np

ANSWER_MARKER = re.compile(r"the answer is", re.IGNORECASE)
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")


def normalise_number(text: str) -> str | None:
    """A number's canonical text: thousands separators dropped, a fraction evaluated,
    "3.0" and "3" the same; None if it is not a finite number."""
    value = text.replace(",", "")
    try:
        number = Fraction(value) if "/" in value else Fraction(Decimal(value))
    except (ValueError, ZeroDivisionError, InvalidOperation):
        return None
    return str(number.numerator) if number.denominator == 1 else str(float(number))


def extract_answer(text: str) -> str | None:
    """The first number after the last "The answer is" (any case), as the original GEM
    evaluation reads it: "The answer is: $1,250." gives "1250"."""
    parts = ANSWER_MARKER.split(text)
    if len(parts) < 2:
        return None
    found = NUMBER.search(parts[-1])
    return normalise_number(found.group()) if found else None


def majority_and_pass_at_k(answers: Sequence[Sequence[str | None]], references: Sequence[str],
                           ks: Sequence[int]) -> dict:
    """Per k, over prompts: maj@k (the most common answer among the first k samples, ties to
    the earliest, is the reference) and pass@k (the reference is among the first k), x 100."""
    scores = {}
    for k in ks:
        majority, passed = [], []
        for candidates, reference in zip(answers, references, strict=True):
            if len(candidates) < k:
                raise ValueError(f"@{k} needs {k} samples per prompt, got {len(candidates)}")
            first = [a for a in candidates[:k] if a is not None]
            counts = Counter(first)
            top = max(counts.values()) if counts else 0
            vote = next((a for a in first if counts[a] == top), None)
            majority.append(vote == reference)
            passed.append(reference in first)
        scores[k] = {"maj": 100.0 * float(np.mean(majority)), "pass": 100.0 * float(np.mean(passed))}
    return scores


def best_and_mean_of_n(rewards: Sequence[Sequence[float]], ns: Sequence[int]) -> dict:
    """Per n, over prompts: the mean of the best and the mean of the first n samples' rewards."""
    scores = {}
    for n in ns:
        if any(len(r) < n for r in rewards):
            raise ValueError(f"best-of-{n} needs {n} samples per prompt")
        scores[n] = {"best": float(np.mean([max(r[:n]) for r in rewards])),
                     "mean": float(np.mean([np.mean(r[:n]) for r in rewards]))}
    return scores


def samples_by_prompt(rows: Sequence[Mapping], value) -> dict:
    """``value(row)`` of each sample, grouped by prompt id in sample order."""
    grouped: dict = {}
    for row in sorted(rows, key=lambda r: (r["id"], r["sample"])):
        grouped.setdefault(row["id"], []).append(value(row))
    return grouped
