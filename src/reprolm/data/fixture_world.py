"""The fixture world: a tiny synthetic English of a few hundred words recombined by
templates. Every fixture dataset (upstream schemas in :mod:`.fixtures`, lm-eval task docs in
:mod:`.task_docs`) is written in it, so a tokenizer and a tiny model trained on it learn
something measurable in seconds."""

from __future__ import annotations

import random

SUBJECTS = [
    "the miller",
    "a young fox",
    "the old river",
    "my neighbour",
    "the village baker",
    "a quiet student",
    "the north wind",
    "the gardener",
    "a tired sailor",
    "the teacher",
    "the blacksmith",
    "a curious child",
    "the night guard",
    "an old painter",
    "the farmer",
    "a travelling singer",
    "the doctor",
    "the small robot",
    "a grey heron",
    "the librarian",
]
VERBS = [
    "carries",
    "remembers",
    "builds",
    "watches",
    "follows",
    "paints",
    "repairs",
    "describes",
    "finds",
    "cleans",
    "measures",
    "opens",
    "counts",
    "explains",
    "guards",
    "plants",
    "sells",
    "borrows",
    "studies",
    "draws",
]
OBJECTS = [
    "the wooden bridge",
    "a bright lantern",
    "the morning bread",
    "seven small boats",
    "the silver key",
    "a map of the hills",
    "the broken clock",
    "three green apples",
    "the stone tower",
    "a letter from home",
    "the long road",
    "an empty basket",
    "the blue door",
    "a box of nails",
    "the quiet garden",
    "the harbour lights",
    "a pile of books",
    "the mountain path",
    "the old piano",
    "a jar of honey",
]
TAILS = [
    "before the rain",
    "near the market",
    "every autumn",
    "with great care",
    "in the evening light",
    "after a long day",
    "for the whole village",
    "without a word",
    "under the old oak",
    "at the edge of town",
    "during the winter fair",
    "by the river",
    "as the bells ring",
    "when the snow falls",
    "on a windy morning",
    "for a friend",
]
QUESTION_TEMPLATES = [
    "Write about {o} and {s}.",
    "Explain how {s} {v} {o}.",
    "Tell me a story about {s} {t}.",
    "Describe {o} {t}.",
    "Why does {s} {v_base} {o}?",
    "Give advice to {s} who {v} {o}.",
    "Summarise what happens when {s} {v} {o} {t}.",
    "What should {s} know about {o}?",
]


def _base_form(verb: str) -> str:
    return verb[:-1] if verb.endswith("s") else verb


def sentence(rng: random.Random) -> str:
    s = rng.choice(SUBJECTS)
    return f"{s[0].upper()}{s[1:]} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}."


def passage(rng: random.Random, words: int) -> str:
    """Whole sentences, the last one cut, so the passage has exactly ``words`` words."""
    tokens: list[str] = []
    while len(tokens) < words:
        tokens.extend(sentence(rng).split())
    tokens = tokens[:words]
    text = " ".join(tokens)
    return text if text.endswith(".") else text + "."


def question(rng: random.Random) -> str:
    verb = rng.choice(VERBS)
    return rng.choice(QUESTION_TEMPLATES).format(
        s=rng.choice(SUBJECTS),
        v=verb,
        v_base=_base_form(verb),
        o=rng.choice(OBJECTS),
        t=rng.choice(TAILS),
    )
