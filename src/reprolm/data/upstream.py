"""Every upstream dataset schema the pipeline reads, each defined once: the dataset it comes
from, its record check, the fixture that stands in for it offline, and the adapters that read
its records in the shared forms (chat messages, plain text, instructions, rated responses,
SFT chats, web text of a task document) that builders and corpora ask for.

A source in the config names its ``schema``; a builder or corpus asks that schema for the
adapter it needs, and a schema without it is refused with the schemas that have one.
"""

from __future__ import annotations

import fnmatch
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reprolm.data import fixtures, schemas, task_docs
from reprolm.data.schemas import DataError, Problem
from reprolm.provenance.fingerprint import entry_bound
from reprolm.registry import Registry

Messages = list[dict]


@dataclass(frozen=True)
class UpstreamSchema:
    name: str
    # The upstream dataset(s) and the record fields read.
    origin: str
    check: Callable[[dict], Problem]
    # (n, seed, **options) -> records of one split, or records by split; None where only the
    # hub has the data.
    fixture: Callable[..., list[dict] | dict[str, list[dict]]] | None = None
    # A record's dialogues as chat messages (tokenizer and pretraining corpora).
    conversations: Callable[[dict], list[Messages]] | None = None
    # A record's plain text (tokenizer and pretraining corpora).
    text: Callable[[dict], str] | None = None
    # One instruction: ``instruction`` (first user turn), ``turns`` and schema extras.
    instruction: Callable[[dict], dict] | None = None
    # A rated response: ``conversation`` and ``score`` (``params``: the builder's).
    rated_response: Callable[[dict, Mapping], dict] | None = None
    # An SFT chat as ``messages`` (``template``: the question template, at {instruction}).
    sft_chat: Callable[[dict, str], Messages] | None = None
    # A preference pair as message lists: ``prompt`` (the turns before the answers),
    # ``chosen`` and ``rejected`` (the answers).
    preference_pair: Callable[[dict], dict] | None = None
    # UltraFeedback keeps its SFT chats and preference pairs in splits of its own (train_sft,
    # train_prefs, ...), which chat_sft's and preference_pairs' ``splits`` map ours to; other
    # sources' splits carry our names.
    upstream_splits: bool = False
    # Fields that name a record, unique within a split: pairing and bootstrap units key on
    # them. Records without them are not checked.
    id_fields: tuple[str, ...] = ()
    # A record's form where a schema has several (TRL's standard or conversational), which
    # every row of a split shares: a column holds one type.
    form: Callable[[dict], str] | None = None
    # A task document as web text shows it (question, then answer): pretraining on these is
    # "exposure to the benchmark's format" at tiny scale.
    task_text: Callable[[dict], str] | None = None
    # lm-eval tasks that read this schema (shell patterns).
    lm_eval_tasks: tuple[str, ...] = ()
    # NLTK data the checks of those tasks read, by check (lm-eval downloads it on first use,
    # which offline cannot happen): the workflow fetches it, the lm-eval bridge looks for it.
    nltk_data: Mapping[str, str] = field(default_factory=dict)

    def adapter(self, kind: str, reader: str) -> Callable:
        """The ``kind`` adapter, or an error naming ``reader`` and the schemas that have one."""
        adapt = getattr(self, kind)
        if adapt is None:
            able = [name for name in UPSTREAM_SCHEMAS.names() if getattr(UPSTREAM_SCHEMAS[name], kind) is not None]
            raise ValueError(
                f"{reader} cannot read schema {self.name!r} (it has no {kind} adapter); it reads {', '.join(able)}"
            )
        return adapt


# Looked up by name; a job's code fingerprint names the schemas it reads (their module-level
# names below), so editing one schema's adapter reruns only what reads that schema.
UPSTREAM_SCHEMAS: Registry[UpstreamSchema] = Registry("upstream schema", per_job=True)


def define(schema: UpstreamSchema) -> UpstreamSchema:
    return UPSTREAM_SCHEMAS.register(schema.name, schema)


# ---- adapters shared by several schemas ----

ROLES = {"human": "user", "gpt": "assistant", "system": "system"}


def exchange(user: str, assistant: str) -> Messages:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]


def history(turns: list[str], answer: str) -> Messages:
    """Alternating user/assistant turns (the user's first and last) and the answer."""
    roles = ["user", "assistant"]
    return [{"role": roles[k % 2], "content": text} for k, text in enumerate(turns)] + [
        {"role": "assistant", "content": answer}
    ]


def _single_instruction(field: str) -> Callable[[dict], dict]:
    return lambda record: {"instruction": record[field], "turns": [record[field]]}


def _yes_no(label: int) -> str:
    return "yes" if label else "no"


def _helpsteer_rating(record: dict, params: Mapping) -> dict:
    field = params.get("score_field", "helpfulness")
    if field not in record:
        raise ValueError(f"params.score_field {field!r} is not a field of the source; fields: {sorted(record)}")
    return {"conversation": exchange(record["prompt"], record["response"]), "score": float(record[field])}


def _feedback_rating(record: dict, params: Mapping) -> dict:
    return {
        "conversation": exchange(record["orig_instruction"], record["orig_response"]),
        "score": float(record["orig_score"]),
    }


CALCULATOR_ANNOTATION = re.compile(r"<<[^>]*>>")


def gsm8k_final_answer(solution: str) -> str:
    """The number after GSM8K's ``####``."""
    return solution.rsplit("####", 1)[1].strip()


def gsm8k_stated_answer(solution: str) -> str:
    """A GSM8K solution as an answer ending "The answer is: N" (calculator annotations dropped)."""
    working = CALCULATOR_ANNOTATION.sub("", solution.rsplit("####", 1)[0]).strip()
    return f"{working}\nThe answer is: {gsm8k_final_answer(solution)}"


def task_text(schema_names: list[str], n: int, seed: int) -> list[str]:
    """``n`` question-answer texts per task-doc schema, from the training documents of ``seed``."""
    texts = []
    for name in schema_names:
        schema = UPSTREAM_SCHEMAS.get(name, "task_formats")
        render = schema.adapter("task_text", "task_formats")
        texts += [render(doc) for doc in schema.fixture(n=n, seed=seed)["train"]]
    return texts


def _world_text_fixture(n: int, seed: int, facts_per_document: int = 6, task_formats: list[str] = ()) -> list[dict]:
    """The fixture world's facts as plain-text documents, or (``task_formats``: task-doc
    schemas) question-answer texts in those tasks' formats, ``n`` per schema."""
    if task_formats:
        return [{"text": text} for text in task_text(list(task_formats), n, seed)]
    return task_docs.world_corpus(n, seed, facts_per_document)


# ---- the schemas ----

TEXT = define(
    UpstreamSchema(
        "text", "a plain text corpus: {text}", schemas.fields("text"), _world_text_fixture, text=lambda r: r["text"]
    )
)
OPENHERMES_CONVERSATIONS = define(
    UpstreamSchema(
        "openhermes_conversations",
        'teknium/OpenHermes-2.5: {"conversations": [{"from", "value"}, ...], "source", ...}',
        lambda r: schemas.check_turns(r, "conversations", ("from", "value")),
        fixtures.openhermes,
        conversations=lambda r: [
            [{"role": ROLES.get(t["from"], "user"), "content": t["value"]} for t in r["conversations"]]
        ],
    )
)
LONGFORM = define(
    UpstreamSchema(
        "longform",
        'akoksal/LongForm: {"input", "output", "source", "subset"}',
        schemas.fields("input", "output"),
        fixtures.longform,
        conversations=lambda r: [exchange(r["input"], r["output"])],
    )
)
ELI5 = define(
    UpstreamSchema(
        "eli5",
        'eli5: {"q_id", "title", "selftext", "answers": {"text": [...], "score": [...]}}',
        schemas.check_eli5,
        fixtures.eli5,
        conversations=lambda r: [exchange(r["title"], answer) for answer in r["answers"]["text"]],
    )
)
ARENA_QUESTION = define(
    UpstreamSchema(
        "arena_question",
        'arena-hard-v0.1 question.jsonl: {"question_id", "category", "turns": [{"content"}]}',
        lambda r: schemas.check_turns(r, "turns", ("content",)),
        fixtures.arena_questions,
        conversations=lambda r: [[{"role": "user", "content": turn["content"]} for turn in r["turns"]]],
        instruction=lambda r: {"instruction": r["turns"][0]["content"], "turns": [t["content"] for t in r["turns"]]},
        id_fields=("question_id",),
    )
)
ULTRAFEEDBACK_BINARIZED = define(
    UpstreamSchema(
        "ultrafeedback_binarized",
        'HuggingFaceH4/ultrafeedback_binarized (train_prefs/test_prefs, train_sft/test_sft): {"prompt", '
        '"prompt_id", "chosen"/"rejected": [{"role", "content"}, ...], "score_chosen", "score_rejected", "messages"}',
        schemas.check_preference,
        fixtures.ultrafeedback_binarized,
        instruction=_single_instruction("prompt"),
        sft_chat=lambda r, template: r["messages"],
        preference_pair=lambda r: {
            "prompt": r["chosen"][:-1],
            "chosen": r["chosen"][-1:],
            "rejected": r["rejected"][-1:],
        },
        upstream_splits=True,
        id_fields=("prompt_id",),
    )
)
ALPACA_EVAL = define(
    UpstreamSchema(
        "alpaca_eval",
        'tatsu-lab/alpaca_eval (alpaca_eval_gpt4_baseline): {"instruction", "output" (the reference model\'s '
        'answer), "generator", "dataset"}',
        schemas.fields("instruction", "output"),
        fixtures.alpaca_eval,
        instruction=lambda r: {"instruction": r["instruction"], "turns": [r["instruction"]], "reference": r["output"]},
    )
)
MT_BENCH_PROMPTS = define(
    UpstreamSchema(
        "mt_bench_prompts",
        'HuggingFaceH4/mt_bench_prompts: {"prompt": [turn, ...], "prompt_id", "category", "reference"}',
        lambda r: schemas.check_string_list(r, "prompt"),
        fixtures.mt_bench_prompts,
        instruction=lambda r: {
            "instruction": r["prompt"][0],
            "turns": list(r["prompt"]),
            "category": r.get("category", ""),
            "reference_answers": list(r.get("reference") or []),
        },
        id_fields=("prompt_id",),
    )
)
ALPACA_EVAL_GAMED = define(
    UpstreamSchema(
        "alpaca_eval_gamed",
        'tatsu-lab/alpaca_eval df_gamed.csv (AlpacaEval 2.0 length control): {"model", "index", "preference", '
        '"std_delta_len", "instruction_difficulty", "not_gamed_baseline"}',
        schemas.check_gamed_annotation,
        fixtures.alpaca_eval_gamed,
    )
)
FASTCHAT_JUDGE_PROMPTS = define(
    UpstreamSchema(
        "fastchat_judge_prompts",
        'lm-sys/FastChat fastchat/llm_judge/data/judge_prompts.jsonl: {"name", "type", "system_prompt", '
        '"prompt_template", "output_format", ...}',
        schemas.fields("name", "system_prompt", "prompt_template", "output_format", allow_empty=("system_prompt",)),
        fixtures.fastchat_judge_prompts,
    )
)
HELPSTEER = define(
    UpstreamSchema(
        "helpsteer",
        'nvidia/HelpSteer: {"prompt", "response", "helpfulness", "correctness", "coherence", "complexity", '
        '"verbosity"} (attributes 0-4)',
        schemas.check_helpsteer,
        fixtures.helpsteer,
        rated_response=_helpsteer_rating,
    )
)
FEEDBACK_ORIGIN = (
    'prometheus-eval/Feedback-Bench and Feedback-Collection: {"orig_instruction", "orig_response", '
    '"orig_feedback", "orig_score" (1-5, as text), "orig_criteria", ...}'
)
FEEDBACK_BENCH = define(
    UpstreamSchema(
        "feedback_bench",
        FEEDBACK_ORIGIN,
        schemas.check_feedback,
        fixtures.feedback_records,
        rated_response=_feedback_rating,
    )
)
FEEDBACK_COLLECTION = define(
    UpstreamSchema(
        "feedback_collection",
        FEEDBACK_ORIGIN,
        schemas.check_feedback,
        fixtures.feedback_records,
        rated_response=_feedback_rating,
    )
)
WILDBENCH_OUTPUTS = define(
    UpstreamSchema(
        "wildbench_outputs",
        'allenai/WildBench-V2-Model-Outputs: {"session_id", "chat_history": [user, assistant, ..., user], '
        '"output": [answer], "generator"}',
        schemas.check_wildbench,
        fixtures.wildbench_outputs,
    )
)
RATED_UTTERANCES = define(
    UpstreamSchema(
        "rated_utterances",
        'FLR\'s released rating benchmarks (FLASK, MT-Bench single score): {"conversation": the utterances, '
        'user first, the last being the rated answer; "score": the ground truth}',
        schemas.check_rated_utterances,
        fixtures.rated_utterances,
        rated_response=lambda r, params: {
            "conversation": history(list(r["conversation"][:-1]), r["conversation"][-1]),
            "score": float(r["score"]),
        },
    )
)
NUMINA_COT = define(
    UpstreamSchema(
        "numina_cot",
        'AI-MO/NuminaMath-CoT: {"source", "problem", "solution", "messages": [{"role", "content"}, ...]}',
        lambda r: schemas.fields("problem", "solution")(r) or schemas.check_turns(r, "messages", ("role", "content")),
        fixtures.numina_cot,
        sft_chat=lambda r, template: r["messages"],
    )
)
WRITING_PROMPTS = define(
    UpstreamSchema(
        "writing_prompts",
        'GEM\'s creative-writing prompts (liziniu/GEM data/poem_generation, data/story_generation): {"instruction"}',
        schemas.fields("instruction"),
        fixtures.writing_prompts,
        instruction=_single_instruction("instruction"),
    )
)

# TRL's standard dataset formats (huggingface.co/docs/trl/dataset_formats), the shapes
# researchers keep their own data in: each field a string (standard; read as one user turn
# or one assistant answer, so the model's chat template applies as to every other source)
# or a list of messages (conversational). ``id``, where a file has it, names a record.


def as_messages(value: str | Messages, role: str) -> Messages:
    """A TRL field as messages: a standard string as one ``role`` turn, messages as they are."""
    return [{"role": role, "content": value}] if isinstance(value, str) else list(value)


def trl_form(record: dict) -> str:
    """Standard (the prompt a string) or conversational (messages, or no prompt field)."""
    return "standard" if isinstance(record.get("prompt"), str) else "conversational"


def _trl_pair(record: dict) -> dict:
    if record.get("prompt") is None:
        # Implicit prompt: whole conversations that differ only in the last turn.
        return {"prompt": record["chosen"][:-1], "chosen": record["chosen"][-1:], "rejected": record["rejected"][-1:]}
    return {
        "prompt": as_messages(record["prompt"], "user"),
        "chosen": as_messages(record["chosen"], "assistant"),
        "rejected": as_messages(record["rejected"], "assistant"),
    }


def _prompt_instruction(prompt: Messages) -> dict:
    """The user turns of a prompt as an instruction (the first) and its turns."""
    turns = [message["content"] for message in prompt if message["role"] == "user"]
    return {"instruction": turns[0], "turns": turns}


def _trl_chosen_chat(record: dict) -> Messages:
    pair = _trl_pair(record)
    return pair["prompt"] + pair["chosen"]


def _trl_completion_chat(record: dict) -> Messages:
    return as_messages(record["prompt"], "user") + as_messages(record["completion"], "assistant")


TRL_PREFERENCE = define(
    UpstreamSchema(
        "trl_preference",
        'TRL preference: {"prompt", "chosen", "rejected"} as strings (standard) or message lists '
        '(conversational), or {"chosen", "rejected"} as whole conversations (implicit prompt); optional "id"',
        schemas.check_trl_preference,
        conversations=lambda r: [_trl_chosen_chat(r)],
        instruction=lambda r: _prompt_instruction(_trl_pair(r)["prompt"]),
        sft_chat=lambda r, template: _trl_chosen_chat(r),
        preference_pair=_trl_pair,
        id_fields=("id",),
        form=trl_form,
    )
)
TRL_PROMPT_COMPLETION = define(
    UpstreamSchema(
        "trl_prompt_completion",
        'TRL prompt-completion: {"prompt", "completion"} as strings (standard) or message lists '
        '(conversational); optional "id"',
        schemas.check_trl_prompt_completion,
        conversations=lambda r: [_trl_completion_chat(r)],
        instruction=lambda r: _prompt_instruction(as_messages(r["prompt"], "user")),
        sft_chat=lambda r, template: _trl_completion_chat(r),
        id_fields=("id",),
        form=trl_form,
    )
)
TRL_LANGUAGE_MODELING = define(
    UpstreamSchema(
        "trl_language_modeling",
        'TRL language modeling, standard: {"text"}; optional "id"',
        schemas.fields("text"),
        text=lambda r: r["text"],
        id_fields=("id",),
    )
)
TRL_CONVERSATIONAL = define(
    UpstreamSchema(
        "trl_conversational",
        'TRL language modeling, conversational: {"messages": [{"role", "content"}, ...]}; optional "id"',
        lambda r: schemas.check_turns(r, "messages", ("role", "content")),
        conversations=lambda r: [r["messages"]],
        sft_chat=lambda r, template: r["messages"],
        id_fields=("id",),
    )
)

# lm-eval task documents, in the Hugging Face datasets lm-eval's own task YAML reads.
ARC = define(
    UpstreamSchema(
        "arc",
        'allenai/ai2_arc: {"id", "question", "choices": {"text", "label"}, "answerKey"}',
        task_docs.check_arc,
        task_docs.arc,
        lm_eval_tasks=("arc_easy", "arc_challenge"),
        task_text=lambda doc: "Question: {}\nAnswer: {}".format(
            doc["question"], doc["choices"]["text"][doc["choices"]["label"].index(doc["answerKey"])]
        ),
    )
)
HELLASWAG = define(
    UpstreamSchema(
        "hellaswag",
        'Rowan/hellaswag: {"ctx", "activity_label", "endings", "label", ...}',
        task_docs.check_hellaswag,
        task_docs.hellaswag,
        lm_eval_tasks=("hellaswag",),
    )
)
TRUTHFULQA_MC = define(
    UpstreamSchema(
        "truthfulqa_mc",
        'truthful_qa (multiple_choice): {"question", "mc1_targets", "mc2_targets"}',
        task_docs.check_truthfulqa_mc,
        task_docs.truthfulqa_mc,
        lm_eval_tasks=("truthfulqa_mc1", "truthfulqa_mc2"),
    )
)
MMLU = define(
    UpstreamSchema(
        "mmlu",
        'cais/mmlu: {"question", "subject", "choices", "answer"}',
        task_docs.check_mmlu,
        task_docs.mmlu,
        lm_eval_tasks=("mmlu_*",),
    )
)
WINOGRANDE = define(
    UpstreamSchema(
        "winogrande",
        'winogrande: {"sentence", "option1", "option2", "answer"}',
        task_docs.check_winogrande,
        task_docs.winogrande,
        lm_eval_tasks=("winogrande",),
    )
)
GSM8K = define(
    UpstreamSchema(
        "gsm8k",
        'openai/gsm8k (main): {"question", "answer" (worked solution ending "#### N")}',
        task_docs.check_gsm8k,
        task_docs.gsm8k,
        lm_eval_tasks=("gsm8k",),
        task_text=lambda doc: f"Question: {doc['question']}\nAnswer: {doc['answer']}",
        instruction=lambda r: {
            "instruction": r["question"],
            "turns": [r["question"]],
            "answer": gsm8k_final_answer(r["answer"]),
        },
        sft_chat=lambda r, template: exchange(
            template.replace("{instruction}", r["question"]), gsm8k_stated_answer(r["answer"])
        ),
    )
)
GLUE_COLA = define(
    UpstreamSchema(
        "glue_cola",
        'nyu-mll/glue (cola): {"sentence", "label", "idx"}',
        task_docs.check_glue_cola,
        task_docs.glue_cola,
        lm_eval_tasks=("cola",),
        task_text=lambda doc: (
            f"{doc['sentence']}\nQuestion: Does this sentence make sense?\nAnswer: {_yes_no(doc['label'])}"
        ),
    )
)
BOOLQ = define(
    UpstreamSchema(
        "boolq",
        'super_glue (boolq): {"question", "passage", "label", "idx"}',
        task_docs.check_boolq,
        task_docs.boolq,
        lm_eval_tasks=("boolq",),
        task_text=lambda doc: f"{doc['passage']}\nQuestion: {doc['question']}?\nAnswer: {_yes_no(doc['label'])}",
    )
)
IFEVAL = define(
    UpstreamSchema(
        "ifeval",
        'google/IFEval: {"key", "prompt", "instruction_id_list", "kwargs"}',
        task_docs.check_ifeval,
        task_docs.ifeval,
        lm_eval_tasks=("ifeval",),
        # IFEval counts sentences with punkt_tab.
        nltk_data={"length_constraints:number_sentences": "tokenizers/punkt_tab"},
    )
)


# ---- using them ----


def schema_for_task(task: str) -> UpstreamSchema | None:
    """The upstream schema an lm-eval task reads, or None for a task not covered here."""
    for name in UPSTREAM_SCHEMAS:
        schema = UPSTREAM_SCHEMAS[name]
        if any(fnmatch.fnmatchcase(task, pattern) for pattern in schema.lm_eval_tasks):
            return schema
    return None


def nltk_data_needed(task: str) -> Mapping[str, str]:
    """The NLTK data an lm-eval task's checks read, by check (none for a task not covered)."""
    schema = schema_for_task(task)
    return schema.nltk_data if schema is not None else {}


def schemas_read(sources: Mapping[str, Mapping]) -> list[str]:
    """The schemas the named sources' records are read by: each source's own, and the
    task-doc schemas whose texts a ``text`` fixture renders (``task_formats``)."""
    names = {spec["schema"] for spec in sources.values()}
    names |= {name for spec in sources.values() for name in (spec.get("fixture") or {}).get("task_formats", [])}
    return sorted(names)


def schema_entries(names) -> list[tuple[str, str]]:
    """The named schemas as references to the statements that define them (for a job's
    code fingerprint, which follows each into its check, fixture and adapters)."""
    return sorted(entry_bound(__name__, UPSTREAM_SCHEMAS.get(name)) for name in set(names))


def task_schemas(tasks) -> list[str]:
    """The schemas the given lm-eval tasks' documents are checked against."""
    return sorted({schema.name for task in tasks if (schema := schema_for_task(task)) is not None})


def make_fixture(schema: str, n: int, seed: int, **options) -> list[dict] | dict[str, list[dict]]:
    """Records of one split, or (lm-eval task docs) records by split."""
    make = UPSTREAM_SCHEMAS.get(schema).fixture
    if make is None:
        raise ValueError(f"schema {schema!r} has no fixture; name a hub dataset for this source")
    # A misspelt option would otherwise be dropped silently and change nothing.
    takes = set(inspect.signature(make).parameters) - {"n", "seed"}
    unknown = sorted(set(options) - takes)
    if unknown:
        raise ValueError(f"fixture for schema {schema!r}: unknown options {unknown}; it takes {sorted(takes)}")
    return make(n=n, seed=seed, **options)


def validate_records(records: list[dict], schema: str, path) -> list[dict]:
    """Every record checked against ``schema``; the first bad one raises a :class:`DataError`
    naming the file, the row and the field."""
    upstream = UPSTREAM_SCHEMAS.get(schema)
    first_row_of: dict[tuple, int] = {}
    for row, record in enumerate(records):
        if not isinstance(record, dict):
            raise DataError(path, row, "<record>", "expected a mapping")
        problem = upstream.check(record)
        if problem:
            raise DataError(path, row, *problem)
        if upstream.form and upstream.form(record) != upstream.form(records[0]):
            raise DataError(
                path,
                row,
                "prompt",
                f"{upstream.form(record)}, but row 0 is {upstream.form(records[0])}: a split keeps one form",
            )
        key = tuple(record.get(field) for field in upstream.id_fields)
        if key and None not in key:
            if key in first_row_of:
                value = key[0] if len(key) == 1 else key
                raise DataError(
                    path, row, ", ".join(upstream.id_fields), f"{value!r} repeats row {first_row_of[key]}'s id"
                )
            first_row_of[key] = row
    return records


def load_records(path: str | Path, schema: str) -> list[dict]:
    """Read a raw parquet source and validate every row against ``schema``."""
    # Here, not at the top: the config's lookups read the schemas' declarations while the
    # workflow parses, without loading pyarrow.
    import pyarrow.parquet as pq

    return validate_records(pq.read_table(path).to_pylist(), schema, path)
