"""Small fixture datasets in the upstream schemas, made deterministically from a seed.

The text is the fixture world's (:mod:`.fixture_world`). Response lengths are spread over
the length-target bins so that Ruler's MLT buckets fill.
"""

from __future__ import annotations

import math
import random

from reprolm.data.fixture_world import OBJECTS, SUBJECTS, TAILS, passage, question


def response_length(rng: random.Random, bin_centres: list[int], max_words: int) -> int:
    """Half near a length bin's centre, half spread evenly, so buckets fill."""
    if rng.random() < 0.5:
        centre = rng.choice(bin_centres)
        return max(1, min(max_words, centre + rng.randint(-4, 4)))
    return rng.randint(2, max_words)


def openhermes(n: int, seed: int, bin_centres: list[int], max_words: int) -> list[dict]:
    """OpenHermes-2.5 records; about one in ten is multi-turn or has a system turn."""
    rng = random.Random(seed)
    records = []
    for index in range(n):
        turns = [
            {"from": "human", "value": question(rng), "weight": None},
            {"from": "gpt", "value": passage(rng, response_length(rng, bin_centres, max_words)), "weight": None},
        ]
        kind = rng.random()
        if kind < 0.05:
            turns.insert(0, {"from": "system", "value": "You are a helpful assistant.", "weight": None})
        elif kind < 0.10:
            turns += [
                {"from": "human", "value": question(rng), "weight": None},
                {"from": "gpt", "value": passage(rng, rng.randint(5, 40)), "weight": None},
            ]
        records.append(
            {
                "conversations": turns,
                "source": "reprolm-fixture",
                "category": "synthetic",
                "skip_prompt_formatting": False,
                "id": f"oh-{index}",
            }
        )
    return records


def longform(n: int, seed: int, bin_centres: list[int], max_words: int) -> list[dict]:
    rng = random.Random(seed)
    return [
        {
            "input": question(rng),
            "output": passage(rng, response_length(rng, bin_centres, max_words)),
            "source": "reprolm-fixture",
            "subset": "synthetic",
        }
        for _ in range(n)
    ]


def eli5(n: int, seed: int, bin_centres: list[int], max_words: int) -> list[dict]:
    rng = random.Random(seed)
    records = []
    for index in range(n):
        answers = [passage(rng, response_length(rng, bin_centres, max_words)) for _ in range(rng.randint(1, 3))]
        records.append(
            {
                "q_id": f"eli5-{index}",
                "title": question(rng),
                "selftext": "",
                "answers": {
                    "a_id": [f"a{index}-{k}" for k in range(len(answers))],
                    "text": answers,
                    "score": [rng.randint(1, 50) for _ in answers],
                },
            }
        )
    return records


def arena_questions(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [
        {
            "question_id": f"q{index:04d}",
            "category": "arena-hard-v0.1",
            "cluster": "synthetic",
            "turns": [{"content": question(rng)}],
        }
        for index in range(n)
    ]


def _scrambled(rng: random.Random, words: int) -> str:
    """A passage's words in random order: the kind of answer a rater scores low."""
    tokens = passage(rng, words).rstrip(".").split()
    rng.shuffle(tokens)
    return " ".join(tokens) + "."


def _per_split(name: str, n: int, seed: int, splits, record) -> dict[str, list[dict]]:
    """``n`` records per split, each split from its own seeded generator: ``record(rng, split, index)``."""
    made = {}
    for offset, split in enumerate(splits):
        rng = random.Random(f"{name}/{split}/{seed + offset}")
        made[split] = [record(rng, split, index) for index in range(n)]
    return made


def ultrafeedback_binarized(
    n: int, seed: int, min_words: int = 8, max_words: int = 30, splits: list[str] = ("train_prefs", "test_prefs")
) -> dict[str, list[dict]]:
    """UltraFeedback-binarized records, ``n`` per split (upstream also has ``train_sft`` /
    ``test_sft``, whose ``messages`` SFT trains on): the chosen answer is fluent text of the
    fixture world, the rejected one the same kind of text with its words scrambled, so a
    tiny reward model or DPO run can learn the difference."""

    def record(rng: random.Random, split: str, index: int) -> dict:
        prompt = question(rng)
        words = rng.randint(min_words, max_words)
        user = {"role": "user", "content": prompt}
        chosen, rejected = passage(rng, words), _scrambled(rng, words)
        return {
            "prompt": prompt,
            "prompt_id": f"{split}-{index}",
            "chosen": [user, {"role": "assistant", "content": chosen}],
            "rejected": [user, {"role": "assistant", "content": rejected}],
            "messages": [user, {"role": "assistant", "content": chosen}],
            "score_chosen": float(rng.randint(7, 10)),
            "score_rejected": float(rng.randint(1, 5)),
        }

    return _per_split("ultrafeedback", n, seed, splits, record)


def alpaca_eval(n: int, seed: int, min_words: int = 8, max_words: int = 40) -> list[dict]:
    """AlpacaEval instructions with a reference model's answer (fluent fixture text)."""
    rng = random.Random(f"alpaca_eval/{seed}")
    return [
        {
            "instruction": question(rng),
            "output": passage(rng, rng.randint(min_words, max_words)),
            "generator": "fixture_reference",
            "dataset": "fixture",
        }
        for _ in range(n)
    ]


def alpaca_eval_gamed(n: int, seed: int) -> list[dict]:
    """AlpacaEval's gamed-baseline verdicts (``df_gamed.csv``) on ``n`` instructions: a
    verbose and a concise variant of the reference model, each instruction with a difficulty,
    the preference rising with length and difficulty (the shape AlpacaEval's length control
    fits)."""
    rng = random.Random(f"alpaca_eval_gamed/{seed}")
    difficulty = [rng.gauss(0.0, 1.0) for _ in range(n)]
    records = []
    for model, sign in (("fixture_reference_verbose", 1.0), ("fixture_reference_concise", -1.0)):
        for index in range(n):
            length = sign * abs(rng.gauss(1.0, 0.4))
            logit = 1.2 * math.tanh(length) + 0.6 * difficulty[index] + rng.gauss(0.0, 0.3)
            records.append(
                {
                    "model": model,
                    "index": index,
                    "preference": 1 / (1 + math.exp(-logit)),
                    "std_delta_len": length,
                    "instruction_difficulty": difficulty[index],
                    "not_gamed_baseline": False,
                }
            )
    return records


FOLLOW_UP_TURNS = [
    "Now say that again in fewer words.",
    "Add one more detail about {o}.",
    "Rewrite your answer for {s}.",
    "What would change {t}?",
]


def mt_bench_prompts(n: int, seed: int) -> list[dict]:
    """Two-turn MT-Bench prompts: a fixture question and a follow-up on the answer."""
    rng = random.Random(f"mt_bench/{seed}")
    categories = ["writing", "roleplay", "reasoning", "extraction"]
    return [
        {
            "prompt": [
                question(rng),
                rng.choice(FOLLOW_UP_TURNS).format(s=rng.choice(SUBJECTS), o=rng.choice(OBJECTS), t=rng.choice(TAILS)),
            ],
            "prompt_id": index,
            "category": categories[index % len(categories)],
            "reference": [],
        }
        for index in range(n)
    ]


def degraded(rng: random.Random, words: int, quality: float) -> str:
    """A passage with a share ``1 - quality`` of its words moved to random places: quality 1
    is fluent, quality 0 fully scrambled. Graded answers for rating benchmarks."""
    tokens = passage(rng, words).rstrip(".").split()
    moved = rng.sample(range(len(tokens)), round((1 - quality) * len(tokens)))
    shuffled = [tokens[i] for i in moved]
    rng.shuffle(shuffled)
    for position, token in zip(moved, shuffled):
        tokens[position] = token
    return " ".join(tokens) + "."


QUALITY_LEVELS = [0.0, 0.25, 0.5, 0.75, 1.0]


def helpsteer(n: int, seed: int, min_words: int = 10, max_words: int = 30) -> list[dict]:
    """nvidia/HelpSteer rows: attributes 0-4 follow the answer's fluency."""
    rng = random.Random(f"helpsteer/{seed}")
    records = []
    for _ in range(n):
        quality = rng.choice(QUALITY_LEVELS)
        level = round(4 * quality)
        records.append(
            {
                "prompt": question(rng),
                "response": degraded(rng, rng.randint(min_words, max_words), quality),
                "helpfulness": level,
                "correctness": level,
                "coherence": level,
                "complexity": 1,
                "verbosity": 1,
            }
        )
    return records


# Feedback in the words a user's follow-up would use, so that FLR's fine-tuned variant has
# something to learn at tiny scale.
GOOD_FEEDBACK = "Your answer is clear and easy to follow, and it makes perfect sense."
BAD_FEEDBACK = "Your answer makes no sense and is confusing; it does not answer my question."


def feedback_records(n: int, seed: int, min_words: int = 10, max_words: int = 30) -> list[dict]:
    """prometheus-eval Feedback-Bench / Feedback-Collection rows: a scored response with
    natural-language feedback; score 1-5 follows the answer's fluency."""
    rng = random.Random(f"feedback/{seed}")
    records = []
    for _ in range(n):
        quality = rng.choice(QUALITY_LEVELS)
        score = 1 + round(4 * quality)
        feedback = GOOD_FEEDBACK if quality >= 0.5 else BAD_FEEDBACK
        records.append(
            {
                "orig_instruction": question(rng),
                "orig_response": degraded(rng, rng.randint(min_words, max_words), quality),
                "orig_reference_answer": passage(rng, 20),
                "orig_criteria": "Is the response helpful?",
                "orig_feedback": f"{feedback} [RESULT] {score}",
                "orig_score": str(score),
            }
        )
    return records


def rated_utterances(n: int, seed: int, min_words: int = 10, max_words: int = 30) -> list[dict]:
    """FLR's rating-benchmark entries: a question, an answer, and a 1-10 score following
    the answer's fluency."""
    rng = random.Random(f"rated_utterances/{seed}")
    records = []
    for _ in range(n):
        quality = rng.choice(QUALITY_LEVELS)
        records.append(
            {
                "conversation": [question(rng), degraded(rng, rng.randint(min_words, max_words), quality)],
                "score": 1.0 + 9 * quality,
            }
        )
    return records


# Models of the seed's ELO table, fixture answer quality rising with their rating.
WILDBENCH_MODELS = {
    "gpt-4o-2024-05-13": 1.0,
    "claude-3-opus-20240229": 0.85,
    "Qwen2-72B-Instruct": 0.7,
    "mistral-large-2402": 0.55,
    "Starling-LM-7B-beta": 0.4,
    "Mistral-7B-Instruct-v0.2": 0.25,
    "Llama-2-7b-chat-hf": 0.1,
    "gemma-2b-it": 0.0,
}


def wildbench_outputs(n: int, seed: int, min_words: int = 10, max_words: int = 30) -> list[dict]:
    """WildBench v2 model outputs: ``n`` sessions answered by each fixture model."""
    rng = random.Random(f"wildbench/{seed}")
    sessions = [question(rng) for _ in range(n)]
    return [
        {
            "session_id": f"s{index}",
            "chat_history": [prompt],
            "generator": model,
            "output": [degraded(rng, rng.randint(min_words, max_words), quality)],
        }
        for model, quality in WILDBENCH_MODELS.items()
        for index, prompt in enumerate(sessions)
    ]


def writing_prompts(n: int, seed: int, kind: str = "poem", max_words: int = 200) -> list[dict]:
    """GEM's creative-writing prompts (data/poem_generation, data/story_generation): a titled
    poem or story of at most ``max_words`` words, the title made of fixture-world words."""
    if kind not in ("poem", "story"):
        raise ValueError(f"writing_prompts kind {kind!r}: choose 'poem' or 'story'")
    rng = random.Random(f"writing_prompts/{kind}/{seed}")
    return [
        {
            "instruction": f"Write a {kind} titled '{capitalise_title(rng.choice(OBJECTS))} {rng.choice(TAILS)}' "
            f"with no more than {max_words} words."
        }
        for _ in range(n)
    ]


def numina_cot(
    n: int, seed: int, min_words: int = 20, max_words: int = 120, splits: list[str] = ("train", "test")
) -> dict[str, list[dict]]:
    """NuminaMath-CoT records, ``n`` per split: a question, a worked solution of fixture text
    ending in its answer, and the two as the chat SFT trains on."""

    def record(rng: random.Random, split: str, index: int) -> dict:
        problem = question(rng)
        solution = (
            f"{passage(rng, rng.randint(min_words, max_words))} The answer is $\\boxed{{{rng.randint(0, 999)}}}$."
        )
        return {
            "source": "fixture",
            "problem": problem,
            "solution": solution,
            "messages": [{"role": "user", "content": problem}, {"role": "assistant", "content": solution}],
        }

    return _per_split("numina_cot", n, seed, splits, record)


def capitalise_title(text: str) -> str:
    return text[:1].upper() + text[1:]


def fastchat_judge_prompts(n: int, seed: int) -> list[dict]:
    """Judge prompts in the format of FastChat's ``judge_prompts.jsonl`` (the four
    single-answer ones MT-Bench grading uses, with its placeholders), worded for the tests;
    ``n`` and ``seed`` do not apply: the protocol has exactly these four."""
    answer = "[The Start of Assistant's Answer]\n{answer}\n[The End of Assistant's Answer]"
    reference = "[The Start of Reference Answer]\n{ref_answer_1}\n[The End of Reference Answer]"
    turns = (
        "### User:\n{question_1}\n\n### Assistant A:\n{answer_1}\n\n"
        "### User:\n{question_2}\n\n### Assistant A:\n{answer_2}"
    )
    references = "### Reference answer (turn 1):\n{ref_answer_1}\n\n### Reference answer (turn 2):\n{ref_answer_2}"
    rate = "Rate the answer from 1 to 10 as [[rating]]."
    prompts = {
        "single-v1": f"Question:\n{{question}}\n\n{answer}\n\n{rate}",
        "single-math-v1": f"Question:\n{{question}}\n\n{reference}\n\n{answer}\n\nCompare with the reference. {rate}",
        "single-v1-multi-turn": f"<|The Start of Assistant A's Conversation with User|>\n\n{turns}\n\n"
        f"<|The End of Assistant A's Conversation with User|>\n\nRate the second answer. {rate}",
        "single-math-v1-multi-turn": f"{references}\n\n<|The Start of Assistant A's Conversation with User|>\n\n"
        f"{turns}\n\n<|The End of Assistant A's Conversation with User|>\n\n"
        f"Compare the second answer with its reference. {rate}",
    }
    return [
        {
            "name": name,
            "type": "single",
            "system_prompt": "You grade answers of AI assistants.",
            "prompt_template": template,
            "description": f"test stand-in for FastChat's {name}",
            "category": "math" if "math" in name else "general",
            "output_format": "[[rating]]",
        }
        for name, template in prompts.items()
    ]
