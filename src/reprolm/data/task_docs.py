"""Fixture documents for lm-eval tasks, in the upstream Hugging Face dataset schemas.

Each generator returns ``{split: [record, ...]}`` with the split names that lm-eval's own
task YAML reads, so the built-in task definitions (prompts, ``process_docs``, metrics,
filters) run unchanged on them. Every split gets ``n`` records, made deterministically
from ``seed``.

The content is a tiny synthetic world: each character has one fixed habit (e.g. "the miller
repairs the broken clock every autumn"). Questions ask about those habits, and the correct
answer always agrees with them, so a tiny model trained on text from the same world can
learn part of the answers. The world is the same for every seed; the seed only changes
which questions are asked, their wording and the order of the choices.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

from reprolm.data.fixture_world import OBJECTS, SUBJECTS, TAILS, question
from reprolm.data.schemas import Problem

# (third person, base form, gerund): spelled out because English inflection is irregular.
VERB_FORMS = [
    ("repairs", "repair", "Repairing"),
    ("paints", "paint", "Painting"),
    ("carries", "carry", "Carrying"),
    ("watches", "watch", "Watching"),
    ("cleans", "clean", "Cleaning"),
    ("counts", "count", "Counting"),
    ("opens", "open", "Opening"),
    ("finds", "find", "Finding"),
    ("builds", "build", "Building"),
    ("sells", "sell", "Selling"),
]
COUNTABLE_THINGS = ["apples", "boats", "keys", "books", "lanterns", "nails", "letters", "jars"]


@dataclass(frozen=True)
class Habit:
    """One fact of the fixture world: ``subject`` ``verb`` ``obj`` ``place``."""

    subject: str
    verb: str
    verb_base: str
    gerund: str
    obj: str
    place: str

    def sentence(self) -> str:
        return f"{capitalise(self.subject)} {self.verb} {self.obj} {self.place}."


def capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _make_world() -> list[Habit]:
    # A fixed seed, not the caller's: train and test documents of every seed must describe
    # the same world, or nothing learnt on one split could transfer to another.
    rng = random.Random("reprolm-task-world")
    objects = rng.sample(OBJECTS, len(SUBJECTS))
    return [Habit(subject, *rng.choice(VERB_FORMS), obj, rng.choice(TAILS)) for subject, obj in zip(SUBJECTS, objects)]


WORLD: list[Habit] = _make_world()


def world_text() -> list[str]:
    """The world's facts as plain sentences, e.g. for a pretraining corpus."""
    return [habit.sentence() for habit in WORLD]


def world_corpus(n: int, seed: int, facts_per_document: int = 6) -> list[dict]:
    """Plain-text documents of the world's facts, for pretraining tiny models so that
    train-before-test tasks are learnable."""
    facts = world_text()
    rng = random.Random(seed)
    return [{"text": " ".join(rng.sample(facts, min(facts_per_document, len(facts))))} for _ in range(n)]


def _split_rng(schema: str, split: str, seed: int) -> random.Random:
    return random.Random(f"{schema}/{split}/{seed}")


def _choices_with_answer(rng: random.Random, correct: str, pool: list[str], k: int) -> tuple[list[str], int]:
    """``k`` distinct choices from ``pool`` including ``correct``, shuffled; returns the answer index."""
    choices = rng.sample([item for item in pool if item != correct], k - 1) + [correct]
    rng.shuffle(choices)
    return choices, choices.index(correct)


def _other_habit(rng: random.Random, habit: Habit) -> Habit:
    return rng.choice([other for other in WORLD if other is not habit])


ARC_QUESTIONS = [
    "What does {subject} {verb_base} {place}?",
    "Which of these does {subject} usually {verb_base}?",
    "{Subject} {verb} something {place}. What is it?",
]


def arc(n: int, seed: int) -> dict[str, list[dict]]:
    """allenai/ai2_arc (ARC-Easy / ARC-Challenge): id, question, choices{text,label}, answerKey."""
    docs = {}
    for split in ("train", "validation", "test"):
        rng = _split_rng("arc", split, seed)
        records = []
        for index in range(n):
            habit = rng.choice(WORLD)
            question = rng.choice(ARC_QUESTIONS).format(
                subject=habit.subject,
                Subject=capitalise(habit.subject),
                verb=habit.verb,
                verb_base=habit.verb_base,
                place=habit.place,
            )
            texts, answer = _choices_with_answer(rng, habit.obj, OBJECTS, 4)
            # A few upstream ARC questions label their choices 1-4 instead of A-D.
            labels = list("1234") if rng.random() < 0.1 else list("ABCD")
            records.append(
                {
                    "id": f"reprolm_arc_{split}_{index}",
                    "question": question,
                    "choices": {"text": texts, "label": labels},
                    "answerKey": labels[answer],
                }
            )
        docs[split] = records
    return docs


def hellaswag(n: int, seed: int) -> dict[str, list[dict]]:
    """Rowan/hellaswag: ind, activity_label, ctx_a, ctx_b, ctx, endings, source_id, split,
    split_type, label (a string, as upstream)."""
    docs = {}
    for split, upstream_split in (("train", "train"), ("validation", "val")):
        rng = _split_rng("hellaswag", split, seed)
        records = []
        for index in range(n):
            habit = rng.choice(WORLD)
            ctx_a = f"{capitalise(habit.subject)} arrives {habit.place}."
            ctx_b = f"then {habit.subject}"
            objects, label = _choices_with_answer(rng, habit.obj, OBJECTS, 4)
            records.append(
                {
                    "ind": index,
                    "activity_label": habit.gerund,
                    "ctx_a": ctx_a,
                    "ctx_b": ctx_b,
                    "ctx": f"{ctx_a} {ctx_b}",
                    "endings": [f"{habit.verb} {obj}." for obj in objects],
                    "source_id": f"reprolm~{upstream_split}_{index}",
                    "split": upstream_split,
                    "split_type": rng.choice(["indomain", "zeroshot"]),
                    "label": str(label),
                }
            )
        docs[split] = records
    return docs


def truthfulqa_mc(n: int, seed: int) -> dict[str, list[dict]]:
    """truthfulqa/truthful_qa, config multiple_choice: question, mc1_targets{choices,labels},
    mc2_targets{choices,labels}; true answers first, as upstream."""
    rng = _split_rng("truthfulqa_mc", "validation", seed)
    records = []
    for _ in range(n):
        habit = rng.choice(WORLD)
        question = f"What does {habit.subject} {habit.verb_base} {habit.place}?"
        true_answer = f"{capitalise(habit.subject)} {habit.verb} {habit.obj}."
        false_answers = [
            f"{capitalise(habit.subject)} {habit.verb} {obj}."
            for obj in rng.sample([o for o in OBJECTS if o != habit.obj], 3)
        ]
        mc2_true = [true_answer, "I have no comment."]
        records.append(
            {
                "question": question,
                "mc1_targets": {"choices": [true_answer, *false_answers], "labels": [1, 0, 0, 0]},
                "mc2_targets": {
                    "choices": [*mc2_true, *false_answers],
                    "labels": [1] * len(mc2_true) + [0] * len(false_answers),
                },
            }
        )
    return {"validation": records}


def mmlu(n: int, seed: int, subject: str = "miscellaneous") -> dict[str, list[dict]]:
    """cais/mmlu for one subject (lm-eval task ``mmlu_{subject}``): question, subject,
    choices (4 strings), answer (int). lm-eval evaluates ``test`` and takes few-shot
    examples from ``dev`` (the first ones, in order)."""
    docs = {}
    for split in ("dev", "test"):
        rng = _split_rng(f"mmlu_{subject}", split, seed)
        records = []
        for _ in range(n):
            habit = rng.choice(WORLD)
            choices, answer = _choices_with_answer(rng, habit.obj, OBJECTS, 4)
            records.append(
                {
                    "question": f"Which object does {habit.subject} {habit.verb_base} {habit.place}?",
                    "subject": subject,
                    "choices": choices,
                    "answer": answer,
                }
            )
        docs[split] = records
    return docs


def winogrande(n: int, seed: int) -> dict[str, list[dict]]:
    """allenai/winogrande (winogrande_xl): sentence with one ``_``, option1, option2,
    answer "1" or "2". The text after the blank is the habit of the right option."""
    docs = {}
    for split in ("train", "validation"):
        rng = _split_rng("winogrande", split, seed)
        records = []
        for _ in range(n):
            habit = rng.choice(WORLD)
            other = _other_habit(rng, habit)
            first, second = (habit, other) if rng.random() < 0.5 else (other, habit)
            records.append(
                {
                    "sentence": f"{capitalise(first.subject)} and {second.subject} met {habit.place}, "
                    f"and _ {habit.verb} {habit.obj} as always.",
                    "option1": first.subject,
                    "option2": second.subject,
                    "answer": "1" if first is habit else "2",
                }
            )
        docs[split] = records
    return docs


def _gsm8k_problem(rng: random.Random) -> tuple[str, str]:
    habit = rng.choice(WORLD)
    who, thing = capitalise(habit.subject), rng.choice(COUNTABLE_THINGS)
    kind = rng.choice(["add", "subtract", "multiply"])
    if kind == "add":
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        result = a + b
        question = f"{who} has {a} {thing} and finds {b} more. How many {thing} does {habit.subject} have now?"
        working = f"{who} has {a} + {b} = <<{a}+{b}={result}>>{result} {thing}."
    elif kind == "subtract":
        a = rng.randint(2, 12)
        b = rng.randint(1, a - 1)
        result = a - b
        question = f"{who} has {a} {thing} and sells {b} of them. How many {thing} are left?"
        working = f"{who} has {a} - {b} = <<{a}-{b}={result}>>{result} {thing} left."
    else:
        a, b = rng.randint(2, 4), rng.randint(2, 5)
        result = a * b
        question = f"{who} fills {a} baskets with {b} {thing} each. How many {thing} are there in total?"
        working = f"There are {a} * {b} = <<{a}*{b}={result}>>{result} {thing}."
    return question, f"{working}\n#### {result}"


def gsm8k(n: int, seed: int) -> dict[str, list[dict]]:
    """openai/gsm8k (main): question, answer (worked solution ending in ``#### <number>``)."""
    docs = {}
    for split in ("train", "test"):
        rng = _split_rng("gsm8k", split, seed)
        docs[split] = [dict(zip(("question", "answer"), _gsm8k_problem(rng))) for _ in range(n)]
    return docs


# IFEval instructions the fixture uses: (instruction id, its wording, its kwargs). The
# sentence count needs NLTK's punkt_tab data, which cannot be downloaded offline; the
# fixture keeps it so that a run without it shows what it could not score.
IFEVAL_INSTRUCTIONS = [
    ("punctuation:no_comma", "Do not use any commas in your response.", {}),
    ("change_case:english_lowercase", "Your entire response should be in English, and in all lowercase letters.", {}),
    ("keywords:existence", "Include the keywords {keywords} in the response.", {"keywords": 2}),
    (
        "length_constraints:number_words",
        "Answer with less than {num_words} words.",
        {"relation": "less than", "num_words": 40},
    ),
    (
        "startend:end_checker",
        "Finish your response with this exact phrase: {end_phrase}",
        {"end_phrase": "Is there anything else I can help with?"},
    ),
    (
        "length_constraints:number_sentences",
        "Your response should contain less than {num_sentences} sentences.",
        {"relation": "less than", "num_sentences": 4},
    ),
]


def ifeval(n: int, seed: int) -> dict[str, list[dict]]:
    """google/IFEval (its only split is ``train``): key, prompt, instruction_id_list and one
    kwargs mapping per instruction; each prompt is a fixture question with one or two of
    :data:`IFEVAL_INSTRUCTIONS`, taken in turn so every instruction is used."""
    rng = random.Random(f"ifeval/{seed}")
    records = []
    for index in range(n):
        chosen = [IFEVAL_INSTRUCTIONS[index % len(IFEVAL_INSTRUCTIONS)]]
        if index % 2:
            chosen.append(IFEVAL_INSTRUCTIONS[(index + 2) % len(IFEVAL_INSTRUCTIONS)])
        wordings, kwargs = [], []
        for _, wording, options in chosen:
            filled = dict(options)
            if "keywords" in filled:
                filled["keywords"] = [obj.split()[-1] for obj in rng.sample(OBJECTS, filled["keywords"])]
            shown = {key: ", ".join(value) if isinstance(value, list) else value for key, value in filled.items()}
            wordings.append(wording.format(**shown))
            kwargs.append(filled)
        records.append(
            {
                "key": 1000 + index,
                "prompt": " ".join([question(rng)] + wordings),
                "instruction_id_list": [instruction for instruction, _, _ in chosen],
                "kwargs": kwargs,
            }
        )
    return {"train": records}


def _unacceptable(habit: Habit) -> str:
    """The fact with a subject-verb agreement error, the commonest kind of CoLA violation."""
    return f"{capitalise(habit.subject)} {habit.verb_base} {habit.obj} {habit.place}."


def glue_cola(n: int, seed: int) -> dict[str, list[dict]]:
    """nyu-mll/glue, config cola: sentence, label (1 = acceptable), idx."""
    docs = {}
    for split in ("train", "validation"):
        rng = _split_rng("glue_cola", split, seed)
        records = []
        for index in range(n):
            habit = rng.choice(WORLD)
            acceptable = rng.random() < 0.5
            records.append(
                {
                    "sentence": habit.sentence() if acceptable else _unacceptable(habit),
                    "label": int(acceptable),
                    "idx": index,
                }
            )
        docs[split] = records
    return docs


def boolq(n: int, seed: int) -> dict[str, list[dict]]:
    """aps/super_glue, config boolq: question (lower case, no question mark, as upstream),
    passage, idx, label (1 = yes)."""
    docs = {}
    for split in ("train", "validation"):
        rng = _split_rng("boolq", split, seed)
        records = []
        for index in range(n):
            habit = rng.choice(WORLD)
            answer = rng.random() < 0.5
            if answer:
                asked, sentences = habit.obj, [habit.sentence(), _other_habit(rng, habit).sentence()]
            else:
                # The passage denies what is asked, as a boolq passage does for a "no".
                asked = rng.choice([obj for obj in OBJECTS if obj != habit.obj])
                sentences = [habit.sentence(), f"{capitalise(habit.subject)} never {habit.verb} {asked}."]
            rng.shuffle(sentences)
            records.append(
                {
                    "question": f"does {habit.subject} {habit.verb_base} {asked}",
                    "passage": " ".join(sentences),
                    "idx": index,
                    "label": int(answer),
                }
            )
        docs[split] = records
    return docs


def write_task_docs(docs: dict[str, list[dict]], folder: str | Path) -> dict[str, Path]:
    """Write each split to ``folder/{split}.parquet`` (through a temporary file, so a failed
    write leaves no partial split behind) and return the paths."""
    # Here, not at the top: the schemas' declarations are read while the workflow parses.
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, records in docs.items():
        path = folder / f"{split}.parquet"
        partial = path.with_suffix(".parquet.partial")
        pq.write_table(pa.Table.from_pylist(records), partial)
        partial.replace(path)
        paths[split] = path
    return paths


# ---- record checks: (field, problem) for the first problem found, else None ----


def _problem_str(record: dict, field: str) -> Problem:
    value = record.get(field)
    if not isinstance(value, str):
        return field, f"expected a string, got {type(value).__name__}"
    if not value.strip():
        return field, "empty string"
    return None


def _problem_str_list(value, field: str, *, min_len: int) -> Problem:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return field, "expected a list of strings"
    if len(value) < min_len:
        return field, f"expected at least {min_len} items, got {len(value)}"
    return None


def _problem_int(record: dict, field: str, allowed: range) -> Problem:
    value = record.get(field)
    # bool is an int subclass; a True label is a schema error, not the class 1.
    if not isinstance(value, int) or isinstance(value, bool):
        return field, f"expected an integer, got {type(value).__name__}"
    if value not in allowed:
        return field, f"{value} not in [{allowed.start}, {allowed.stop - 1}]"
    return None


def check_arc(record: dict) -> Problem:
    problem = _problem_str(record, "id") or _problem_str(record, "question") or _problem_str(record, "answerKey")
    if problem:
        return problem
    choices = record.get("choices")
    if not isinstance(choices, dict):
        return "choices", "expected a mapping with text and label"
    problem = _problem_str_list(choices.get("text"), "choices.text", min_len=2) or _problem_str_list(
        choices.get("label"), "choices.label", min_len=2
    )
    if problem:
        return problem
    if len(choices["text"]) != len(choices["label"]):
        return "choices", "text and label differ in length"
    if record["answerKey"] not in choices["label"]:
        return "answerKey", f"{record['answerKey']!r} is not one of the choice labels"
    return None


def check_hellaswag(record: dict) -> Problem:
    problem = (
        _problem_str(record, "activity_label")
        or _problem_str(record, "ctx_a")
        or _problem_str_list(record.get("endings"), "endings", min_len=2)
    )
    if problem:
        return problem
    # ctx_b may be empty upstream (the context then ends with ctx_a).
    if not isinstance(record.get("ctx_b"), str):
        return "ctx_b", f"expected a string, got {type(record.get('ctx_b')).__name__}"
    if record.get("label") not in [str(index) for index in range(len(record["endings"]))]:
        return "label", f"expected a string index into endings, got {record.get('label')!r}"
    return None


def _problem_targets(record: dict, field: str) -> Problem:
    targets = record.get(field)
    if not isinstance(targets, dict):
        return field, "expected a mapping with choices and labels"
    problem = _problem_str_list(targets.get("choices"), f"{field}.choices", min_len=2)
    if problem:
        return problem
    labels = targets.get("labels")
    if (
        not isinstance(labels, list)
        or len(labels) != len(targets["choices"])
        or any(label not in (0, 1) for label in labels)
    ):
        return f"{field}.labels", "expected one 0/1 label per choice"
    if 1 not in labels:
        return f"{field}.labels", "no true choice"
    return None


def check_truthfulqa_mc(record: dict) -> Problem:
    problem = (
        _problem_str(record, "question")
        or _problem_targets(record, "mc1_targets")
        or _problem_targets(record, "mc2_targets")
    )
    if problem:
        return problem
    # lm-eval scores mc1 with the target fixed at index 0: the true answer must come first.
    if record["mc1_targets"]["labels"][0] != 1:
        return "mc1_targets.labels", "the first choice must be the true one"
    return None


def check_mmlu(record: dict) -> Problem:
    problem = (
        _problem_str(record, "question")
        or _problem_str(record, "subject")
        or _problem_str_list(record.get("choices"), "choices", min_len=4)
    )
    if problem:
        return problem
    # lm-eval's prompt prints exactly four choices, A to D.
    if len(record["choices"]) != 4:
        return "choices", f"expected 4 choices, got {len(record['choices'])}"
    return _problem_int(record, "answer", range(4))


def check_winogrande(record: dict) -> Problem:
    problem = _problem_str(record, "sentence") or _problem_str(record, "option1") or _problem_str(record, "option2")
    if problem:
        return problem
    if record["sentence"].count("_") != 1:
        return "sentence", "expected exactly one '_' blank"
    if record.get("answer") not in ("1", "2"):
        return "answer", f"expected '1' or '2', got {record.get('answer')!r}"
    return None


GSM8K_FINAL_ANSWER = re.compile(r"#### (-?[0-9.,]+)\s*$")


def check_gsm8k(record: dict) -> Problem:
    problem = _problem_str(record, "question") or _problem_str(record, "answer")
    if problem:
        return problem
    if not GSM8K_FINAL_ANSWER.search(record["answer"]):
        return "answer", "does not end in '#### <number>'"
    return None


def check_glue_cola(record: dict) -> Problem:
    return (
        _problem_str(record, "sentence")
        or _problem_int(record, "label", range(2))
        or _problem_int(record, "idx", range(2**63))
    )


def check_boolq(record: dict) -> Problem:
    return (
        _problem_str(record, "question")
        or _problem_str(record, "passage")
        or _problem_int(record, "label", range(2))
        or _problem_int(record, "idx", range(2**63))
    )


def check_ifeval(record: dict) -> Problem:
    if not isinstance(record.get("key"), int):
        return "key", f"expected an integer, got {type(record.get('key')).__name__}"
    problem = _problem_str(record, "prompt") or _problem_str_list(
        record.get("instruction_id_list"), "instruction_id_list", min_len=1
    )
    if problem:
        return problem
    kwargs = record.get("kwargs")
    if not isinstance(kwargs, list) or len(kwargs) != len(record["instruction_id_list"]):
        return "kwargs", "expected one mapping per instruction in instruction_id_list"
    return None
