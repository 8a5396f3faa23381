"""Judges: a score for a conversation, and a preference between two answers.

A judge is configured under ``judges:`` by ``kind``:

- ``reward_model``: a sequence-classification checkpoint with one output (a recipe with
  ``objective: reward``, or a hub reward model). ``score`` is its scalar at the end of the
  conversation (``compat: original``: after an extra empty assistant header, as GEM's
  ``evaluation_reward.py`` reads it); ``prefer`` is the Bradley-Terry probability
  sigmoid(r_answer - r_reference).
- ``flr``: follow-up likelihood as reward (:mod:`reprolm.score.flr`) from a causal LM;
  ``prefer`` is Bradley-Terry on the two rewards.
- ``chat_endpoint``: an OpenAI-compatible chat-completions endpoint. ``score`` asks for a
  single-answer rating from 1 to 10 (MT-Bench's ``[[rating]]`` convention); ``prefer`` asks
  which of two answers is better, the order shuffled per item against position bias. The
  API key is read from the environment variable the config names and is never written
  anywhere: the config, logs and provenance hold only the variable's name. With
  ``judge_prompts`` (a source of FastChat's ``judge_prompts.jsonl``) it grades as FastChat's
  MT-Bench does: its single-answer prompts, the second turn judged with the first in view,
  and math, reasoning and coding answers against the rows' reference answers.
- ``alpaca_eval``: AlpacaEval 2.0 through the ``alpaca_eval`` package (its annotator and its
  length-controlled win rate; :mod:`reprolm.score.alpaca_eval_judge`). Pairs only.

A judge's answers that cannot be parsed are NaN, counted and left out of means.

Succession: an entry names its model (``model``; an ``alpaca_eval`` judge's is its
annotator's) and the date it stands for (``as_of``). A judge whose model is retired is given
a ``successor`` (another ``judges`` entry): :func:`with_successors` puts the successor
wherever the config names the retired judge, so every judged rule runs the successor and
every judged table names it, and ``released_verdicts`` (the retired judge's published
verdicts in AlpacaEval's ``annotations.json`` format) are what the successor is measured
against (:mod:`reprolm.aggregate.judge_agreement`). A judge is never swapped silently.

The endpoint judges (every kind that is not :attr:`JudgeKind.local`) retry transient failures
(``max_retries``, default 5) and, in the workflow, keep every verdict in a cache
(:mod:`reprolm.score.judge_cache`) so that a rerun only sends what it has not sent before.
"""

from __future__ import annotations

import logging
import math
import os
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reprolm.errors import ConfigError
from reprolm.paths import model_dir, raw_dir
from reprolm.registry import Registry
from reprolm.score.api_requests import DEFAULT_MAX_RETRIES, request_failure
from reprolm.score.flr import MAX_LENGTH as FLR_MAX_LENGTH
from reprolm.score.flr import FollowUpScorer, load_followups
from reprolm.score.judge_cache import CACHE_ROOT, JudgeCache, cache_dir
from reprolm.stats.estimate import RESAMPLES

log = logging.getLogger(__name__)

# AlpacaEval 2.0's annotator: an ``alpaca_eval`` judge's where its ``annotator`` names none.
DEFAULT_ANNOTATOR = "weighted_alpaca_eval_gpt4_turbo"
Conversation = list[dict]  # [{"role", "content"}, ...], ending with the assistant's answer


@dataclass(frozen=True)
class RewardReadout:
    """Where a reward model's scalar is read: at the rendered conversation's last token, the
    chat rendered with or without a trailing generation prompt."""

    name: str
    add_generation_prompt: bool
    protocol_note: str = ""


# ``paper``: the answer's end of turn. ``original``: GEM's evaluation_reward.py renders the
# chat with add_generation_prompt=True after the answer, so its reward is read at the last
# token of an extra, empty assistant header.
REWARD_READOUTS: Registry[RewardReadout] = Registry("reward read-out")
REWARD_READOUTS.register("paper", RewardReadout("paper", add_generation_prompt=False))
REWARD_READOUTS.register(
    "original",
    RewardReadout("original", add_generation_prompt=True, protocol_note="; read after an extra assistant header"),
)


class RewardModelJudge:
    kind = "reward_model"
    scale = "reward (unbounded)"
    protocol = "reward model: grade = reward; preference = sigmoid(r_answer - r_reference)"

    def __init__(
        self,
        model_path: str,
        batch_size: int = 8,
        max_length: int = 1024,
        precision: str = "float32",
        compat: str = "paper",
    ):
        self.readout = REWARD_READOUTS.get(compat, "reward model compat")
        self.protocol = RewardModelJudge.protocol + self.readout.protocol_note
        from transformers import AutoModelForSequenceClassification

        from reprolm.models.loading import device_map, input_device, load_tokenizer, torch_dtype, trusts_remote_code

        self.tokenizer = load_tokenizer(model_path)
        self.model = AutoModelForSequenceClassification.from_pretrained(
            model_path,
            dtype=torch_dtype(precision),
            device_map=device_map(),
            trust_remote_code=trusts_remote_code(model_path),
        ).eval()
        self.device = input_device(self.model)
        if self.model.config.num_labels != 1:
            raise ValueError(
                f"{model_path}: a reward model has one output, this one has num_labels={self.model.config.num_labels}"
            )
        # Hub reward models often ship without a pad token; the head finds each row's last
        # real token through it, so batches need one.
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if self.model.config.pad_token_id is None:
            self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.batch_size, self.max_length = batch_size, max_length

    def score(self, conversations: Sequence[Conversation]) -> list[float]:
        import torch

        pad = self.tokenizer.pad_token_id
        scores: list[float] = []
        for start in range(0, len(conversations), self.batch_size):
            # The head reads the last token (the answer's end, or the trailing header's under
            # ``compat: original``): over-long conversations lose their beginning, never their end.
            encoded = [
                self.tokenizer.apply_chat_template(
                    c, tokenize=True, return_dict=True, add_generation_prompt=self.readout.add_generation_prompt
                )["input_ids"][-self.max_length :]
                for c in conversations[start : start + self.batch_size]
            ]
            width = max(map(len, encoded))
            input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids in encoded], device=self.device)
            mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids in encoded], device=self.device)
            with torch.no_grad():
                logits = self.model(input_ids=input_ids, attention_mask=mask).logits
            scores.extend(logits[:, 0].float().tolist())
        return scores

    def prefer(self, instructions: Sequence[str], answers: Sequence[str], references: Sequence[str]) -> list[float]:
        answer_scores = self.score([_exchange(i, a) for i, a in zip(instructions, answers, strict=True)])
        reference_scores = self.score([_exchange(i, r) for i, r in zip(instructions, references, strict=True)])
        return [1.0 / (1.0 + math.exp(r - a)) for a, r in zip(answer_scores, reference_scores)]


RATING = re.compile(r"\[\[(\d+(?:\.\d+)?)\]\]")
CHOICE = re.compile(r"\b(?:output|answer)?\s*\(?([ab])\)?\s*$", re.IGNORECASE)

GRADING_PROMPT = """You are grading the last answer of an AI assistant in the conversation below.
Judge how helpful, correct, relevant and detailed that answer is, given the whole conversation.
Explain briefly, then give a rating from 1 to 10 in exactly this form: [[rating]].

{conversation}"""

PAIRWISE_PROMPT = """Two AI assistants answered the same instruction. Decide which answer a careful
human reader would prefer, judging helpfulness, correctness and clarity, not length.

Instruction:
{instruction}

Answer (a):
{first}

Answer (b):
{second}

Reply with a single letter: a or b."""


def _render(conversation: Conversation) -> str:
    return "\n\n".join(f"[{turn['role'].upper()}]\n{turn['content']}" for turn in conversation)


class ChatEndpointJudge:
    kind = "chat_endpoint"
    scale = "rating 1-10"
    # Not AlpacaEval's annotator (kind alpaca_eval) nor FastChat's MT-Bench judge prompts.
    protocol = "chat endpoint with reprolm's grading and pairwise prompts"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str,
        seed: int = 0,
        max_tokens: int = 512,
        max_retries: int = DEFAULT_MAX_RETRIES,
        name: str | None = None,
        cache: JudgeCache | None = None,
    ):
        """``name``: the judge's key under ``judges`` (errors name it); ``cache``: where its
        verdicts are kept (none by default)."""
        from openai import OpenAI

        self.name = name or model
        key = os.environ.get(api_key_env)
        if not key:
            raise ValueError(
                f"judge {self.name!r} at {base_url}: environment variable {api_key_env!r} (its API key) is not set"
            )
        # The client itself retries transient failures with exponential backoff (0.5 s,
        # doubling, at most 8 s) or after the server's Retry-After, and raises others at once.
        self.client = OpenAI(base_url=base_url, api_key=key, max_retries=max_retries)
        self.base_url, self.max_retries = base_url, max_retries
        self.model, self.seed, self.max_tokens = model, seed, max_tokens
        self.cache = cache if cache is not None else JudgeCache({})

    def _complete(self, messages: list[dict], judged: Sequence[str]) -> str:
        """The endpoint's reply to ``messages``, which judge the model outputs ``judged``;
        a request sent before is answered from the cache."""
        request = {
            "model": self.model,
            "messages": messages,
            "temperature": 0.0,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
        }
        return self.cache.fetch(request, judged, lambda: self._send(request))

    def _send(self, request: Mapping) -> str:
        import openai

        try:
            reply = self.client.chat.completions.create(**request)
        except (openai.APIStatusError, openai.APIConnectionError) as error:
            # Not chained: the client's error repeats the endpoint's body unmasked.
            raise request_failure(self.name, self.base_url, error, self.max_retries, self.client.api_key) from None
        return reply.choices[0].message.content or ""

    def score(self, conversations: Sequence[Conversation]) -> list[float]:
        scores = []
        for conversation in conversations:
            prompt = GRADING_PROMPT.format(conversation=_render(conversation))
            found = RATING.findall(self._complete([{"role": "user", "content": prompt}], [conversation[-1]["content"]]))
            scores.append(float(found[-1]) if found else math.nan)
        return scores

    def prefer(self, instructions: Sequence[str], answers: Sequence[str], references: Sequence[str]) -> list[float]:
        order = random.Random(self.seed)
        preferences = []
        for instruction, answer, reference in zip(instructions, answers, references, strict=True):
            answer_first = order.random() < 0.5
            first, second = (answer, reference) if answer_first else (reference, answer)
            prompt = PAIRWISE_PROMPT.format(instruction=instruction, first=first, second=second)
            reply = self._complete([{"role": "user", "content": prompt}], [answer, reference])
            choice = CHOICE.search(reply.strip().rstrip(".!"))
            if choice is None:
                preferences.append(math.nan)
                continue
            picked_first = choice.group(1).lower() == "a"
            preferences.append(1.0 if picked_first == answer_first else 0.0)
        return preferences


# FastChat's categories graded against a reference answer, and its rating patterns.
REFERENCE_CATEGORIES = ("math", "reasoning", "coding", "arena-hard-200")
FASTCHAT_RATING = re.compile(r"\[\[(\d+\.?\d*)\]\]")
FASTCHAT_RATING_BACKUP = re.compile(r"\[(\d+\.?\d*)\]")
# The single-answer prompts MT-Bench grading uses.
FASTCHAT_SINGLE_PROMPTS = ("single-v1", "single-math-v1", "single-v1-multi-turn", "single-math-v1-multi-turn")


class FastChatMTBenchJudge(ChatEndpointJudge):
    """MT-Bench single-answer grading with FastChat's judge prompts (``single-v1``,
    ``single-math-v1`` and their ``-multi-turn`` forms), as its ``gen_judgment.py``: the
    prompt's system message, temperature 0, the first ``[[rating]]`` (else ``[rating]``)."""

    protocol = (
        "FastChat MT-Bench single-answer grading (its judge prompts, reference answers for math, "
        "reasoning, coding); win rates with reprolm's pairwise prompt"
    )

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str,
        judge_prompts: Mapping[str, Mapping],
        seed: int = 0,
        max_tokens: int = 2048,
        max_retries: int = DEFAULT_MAX_RETRIES,
        name: str | None = None,
        cache: JudgeCache | None = None,
    ):
        super().__init__(
            base_url,
            model,
            api_key_env,
            seed=seed,
            max_tokens=max_tokens,
            max_retries=max_retries,
            name=name,
            cache=cache,
        )
        self.prompts = judge_prompts

    def _rate(self, name: str, values: Mapping[str, str], judged: Sequence[str]) -> float:
        prompt = self.prompts[name]
        messages = [{"role": "system", "content": prompt["system_prompt"]}] if prompt["system_prompt"] else []
        messages.append({"role": "user", "content": prompt["prompt_template"].format(**values)})
        text = self._complete(messages, judged)
        found = FASTCHAT_RATING.search(text) or FASTCHAT_RATING_BACKUP.search(text)
        return float(found.group(1)) if found else math.nan

    def grade_records(self, rows: Sequence[Mapping]) -> list[list[float]]:
        """Each row's grade per assistant turn (MT-Bench has two)."""
        grades = []
        for row in rows:
            conversation = conversation_of(row)
            questions = [turn["content"] for turn in conversation if turn["role"] == "user"]
            answers = [turn["content"] for turn in conversation if turn["role"] == "assistant"]
            if not 1 <= len(answers) <= 2:
                raise ValueError(
                    f"prompt {row.get('id')!r}: FastChat's MT-Bench grading takes one or two turns, not {len(answers)}"
                )
            with_reference = row.get("category") in REFERENCE_CATEGORIES
            references = list(row.get("reference_answers") or [])
            if with_reference and len(references) < len(answers):
                raise KeyError(
                    f"prompt {row.get('id')!r}: category {row['category']!r} is graded against reference "
                    f"answers, and the row has {len(references)} for {len(answers)} turns"
                )
            kind = "single-math-v1" if with_reference else "single-v1"
            first = {"question": questions[0], "answer": answers[0]}
            if with_reference:
                first["ref_answer_1"] = references[0]
            row_grades = [self._rate(kind, first, answers[:1])]
            if len(answers) == 2:
                both = {
                    "question_1": questions[0],
                    "question_2": questions[1],
                    "answer_1": answers[0],
                    "answer_2": answers[1],
                }
                if with_reference:
                    both.update(ref_answer_1=references[0], ref_answer_2=references[1])
                row_grades.append(self._rate(f"{kind}-multi-turn", both, answers))
            grades.append(row_grades)
        return grades


def read_judge_prompts(folder: str) -> dict[str, dict]:
    """FastChat's judge prompts from a ``fastchat_judge_prompts`` source, by name."""
    from reprolm.data.sources import read_source

    prompts = {record["name"]: record for record in read_source(folder, "fastchat_judge_prompts")}
    missing = [name for name in FASTCHAT_SINGLE_PROMPTS if name not in prompts]
    if missing:
        raise KeyError(f"{folder}: judge prompts lack {missing}; FastChat's judge_prompts.jsonl has them all")
    return prompts


@dataclass(frozen=True)
class JudgeInput:
    """A file a judge kind's jobs read, named by a field of its spec."""

    # Its name among the job's inputs (the ``files`` that :func:`make_judge` takes).
    name: str
    # The spec's field that names it.
    field: str
    # What the field names: ``model`` (a workflow model ``{base}/{recipe}``, whose folder is
    # read), ``file`` (a path, read as it is) or ``source`` (a source, whose raw folder is read).
    reads: str
    # What the judge does with it, for errors.
    purpose: str
    # A source's schema (the one its reader reads), and that reader, for errors.
    schema: str | None = None
    reader: str = ""

    def path(self, spec: Mapping) -> str:
        value = spec[self.field]
        if self.reads == "model":
            return model_dir(*value.split("/", 1))
        return raw_dir(value) if self.reads == "source" else value

    def missing(self, spec: Mapping, judge: str) -> str:
        """The error of a judge made without this input."""
        what = {"model": "model's folder", "file": "file", "source": "source's folder"}[self.reads]
        return f"judge {judge!r} {self.purpose}: it needs the {spec[self.field]!r} {what}"


@dataclass(frozen=True)
class JudgeKind:
    """A ``judges.*.kind``: how to make its judge, what its jobs read and what it can judge."""

    name: str
    # (spec, files, seed, name, cache) -> the judge.
    make: Callable[..., object]
    inputs: tuple[JudgeInput, ...] = ()
    # Compares two answers and gives no single grade.
    pairwise_only: bool = False
    # The model its verdicts come from, by its spec.
    verdicts_model: Callable[[Mapping], str] = field(default=lambda spec: spec["model"])
    # How a table's caption names the kind (its name where empty).
    title: str = ""
    # (spec, an answer's tokens or None where unknown, the workflow's folder) -> the tokens
    # its model reads forward to judge that answer, for the job's need (reprolm.need); None
    # where it cannot say. Only a local kind has one.
    forward_tokens: Callable[[Mapping, int | None, Path], int | None] | None = None

    @property
    def local(self) -> bool:
        """Runs a model of the workflow's own (its checkpoint is an input of its jobs); the
        other kinds only send requests to an API."""
        return any(given.reads == "model" for given in self.inputs)

    def files(self, spec: Mapping) -> dict[str, str]:
        """What a judge of this kind reads, by input name: each input its spec names."""
        return {given.name: given.path(spec) for given in self.inputs if spec.get(given.field)}


JUDGES: Registry[JudgeKind] = Registry("judge kind")


def register_judge_kind(name: str, inputs: tuple[JudgeInput, ...] = (), pairwise_only: bool = False, **properties):
    """``@register_judge_kind(name, ...)`` on the function that makes a kind's judge."""

    def decorate(make: Callable[..., object]) -> Callable[..., object]:
        JUDGES.register(name, JudgeKind(name, make, inputs, pairwise_only, **properties))
        return make

    return decorate


def judge_kind(spec: Mapping, where: str | None = None) -> JudgeKind:
    """The kind of a ``judges`` entry."""
    return JUDGES.get(spec["kind"], where)


def judge_names(judges: Mapping[str, Mapping], api: bool) -> list[str]:
    """The names of the ``judges`` entries that only send requests to an API (``api``), or
    of those that run a model."""
    return [name for name, spec in judges.items() if (not judge_kind(spec).local) == api]


def judge_name_regex(judges: Mapping[str, Mapping], api: bool) -> str:
    """A wildcard regex matching exactly the API judges' names (``api``) or the model
    judges', so that each judge output has one producing rule of its stage's pair."""
    names = [re.escape(name) for name in judge_names(judges, api)]
    # An empty alternation would match the empty string; (?!) matches nothing.
    return "|".join(names) if names else "(?!)"


JUDGE_MODEL = JudgeInput("judge_model", "model", "model", "runs its model")
REWARD_MODEL_MAX_LENGTH = 1024
# A follow-up's tokens, at most (they are short questions and remarks): what scoring one
# adds to the conversation's forward pass.
FOLLOWUP_TOKENS = 32


def _reward_model_tokens(spec: Mapping, tokens: int | None, root: Path) -> int:
    """One forward pass over the answer in its conversation, cut at ``max_length``."""
    length = spec.get("max_length", REWARD_MODEL_MAX_LENGTH)
    return min(tokens or length, length)


def _flr_tokens(spec: Mapping, tokens: int | None, root: Path) -> int | None:
    """The conversation once (the paper's scoring reuses its cache for every follow-up; the
    original's reads one position of it), and each follow-up's tokens."""
    path = root / spec["followups"]
    if not path.is_file():
        return None
    followups = load_followups(path, spec.get("categories"))
    count = sum(len(utterances) for sides in followups.values() for utterances in sides.values())
    length = spec.get("max_length", FLR_MAX_LENGTH)
    return min(tokens or length, length) + count * FOLLOWUP_TOKENS


@register_judge_kind(
    "flr",
    inputs=(JUDGE_MODEL, JudgeInput("followups", "followups", "file", "scores the likelihood of follow-ups")),
    title="follow-up likelihood",
    forward_tokens=_flr_tokens,
)
def _flr_judge(spec: Mapping, files: Mapping[str, str], seed: int, name: str | None, cache: JudgeCache):
    return FollowUpScorer(
        files["judge_model"],
        load_followups(files["followups"], spec.get("categories")),
        compat=spec.get("compat", "paper"),
        format=spec.get("format", "chat"),
        batch_size=spec.get("batch_size", 16),
        max_length=spec.get("max_length", FLR_MAX_LENGTH),
        precision=spec.get("precision", "float32"),
    )


@register_judge_kind("reward_model", inputs=(JUDGE_MODEL,), title="reward model", forward_tokens=_reward_model_tokens)
def _reward_model_judge(spec: Mapping, files: Mapping[str, str], seed: int, name: str | None, cache: JudgeCache):
    return RewardModelJudge(
        files["judge_model"],
        batch_size=spec.get("batch_size", 8),
        max_length=spec.get("max_length", REWARD_MODEL_MAX_LENGTH),
        precision=spec.get("precision", "float32"),
        compat=spec.get("compat", "paper"),
    )


@register_judge_kind(
    "chat_endpoint",
    inputs=(
        JudgeInput(
            "judge_prompts",
            "judge_prompts",
            "source",
            "grades with FastChat's prompts",
            schema="fastchat_judge_prompts",
            reader="FastChat's MT-Bench grading",
        ),
    ),
    title="chat endpoint",
)
def _chat_endpoint_judge(spec: Mapping, files: Mapping[str, str], seed: int, name: str | None, cache: JudgeCache):
    requests = {"seed": seed, "max_retries": spec.get("max_retries", DEFAULT_MAX_RETRIES), "name": name, "cache": cache}
    if spec.get("judge_prompts"):
        return FastChatMTBenchJudge(
            spec["base_url"],
            spec["model"],
            spec["api_key_env"],
            read_judge_prompts(files["judge_prompts"]),
            max_tokens=spec.get("max_tokens", 2048),
            **requests,
        )
    return ChatEndpointJudge(
        spec["base_url"], spec["model"], spec["api_key_env"], max_tokens=spec.get("max_tokens", 512), **requests
    )


def _alpaca_eval_annotator_model(spec: Mapping) -> str:
    """The model of an ``alpaca_eval`` judge's annotator, as the package's annotator config
    names it."""
    import alpaca_eval
    import yaml

    annotator = spec.get("annotator", DEFAULT_ANNOTATOR)
    configs = Path(alpaca_eval.__file__).parent / "evaluators_configs" / annotator / "configs.yaml"
    return yaml.safe_load(configs.read_text())[annotator]["completions_kwargs"]["model_name"]


@register_judge_kind(
    "alpaca_eval",
    inputs=(
        JudgeInput(
            "length_control",
            "length_control",
            "source",
            "controls for length",
            schema="alpaca_eval_gamed",
            reader="AlpacaEval's length control (its df_gamed.csv)",
        ),
    ),
    pairwise_only=True,
    verdicts_model=_alpaca_eval_annotator_model,
    title="AlpacaEval annotator",
)
def _alpaca_eval_judge(spec: Mapping, files: Mapping[str, str], seed: int, name: str | None, cache: JudgeCache):
    from reprolm.score.alpaca_eval_judge import AlpacaEvalJudge

    return AlpacaEvalJudge(
        spec.get("annotator", DEFAULT_ANNOTATOR),
        spec["base_url"],
        spec["api_key_env"],
        files["length_control"],
        max_retries=spec.get("max_retries", DEFAULT_MAX_RETRIES),
        name=name,
        cache=cache,
        lc_resamples=spec.get("lc_resamples", RESAMPLES),
    )


def make_judge(
    spec: Mapping,
    files: Mapping[str, str] | None = None,
    seed: int = 0,
    name: str | None = None,
    cache_folder: str | os.PathLike | None = None,
):
    """The judge a ``judges.{name}`` spec describes. ``files``: what its jobs read, by the
    names of its kind's inputs (:attr:`JudgeKind.files`: a model's folder as ``judge_model``,
    FLR's ``followups``, FastChat's ``judge_prompts`` source folder, AlpacaEval's
    ``length_control`` source folder); an endpoint's key comes from the environment.
    ``name``: its key under ``judges``, which errors name; an endpoint judge keeps its
    verdicts in ``cache_folder`` when one is given."""
    kind = judge_kind(spec)
    files = dict(files or {})
    for given in kind.inputs:
        if spec.get(given.field) and files.get(given.name) is None:
            raise ValueError(given.missing(spec, name or spec.get("model") or spec.get("annotator") or kind.name))
    return kind.make(spec, files, seed, name, JudgeCache(spec, cache_folder))


def job_judge(smk):
    """The judge of a workflow job (a judge rule's ``snakemake`` object): an endpoint judge
    keeps its verdicts under ``resources/judge_cache/{judge}/``, shared by all its jobs."""
    name = smk.wildcards.judge
    return make_judge(smk.params.judge, smk.input, smk.params.seed, name=name, cache_folder=cache_dir(CACHE_ROOT, name))


def request_counts(judge) -> dict:
    """A score's record of what its endpoint judge's verdicts cost: how many came from the
    cache and how many were requested (nothing for a judge that runs a model)."""
    return {} if JUDGES[judge.kind].local else {"verdicts": judge.cache.counts()}


def judge_model(spec: Mapping) -> str:
    """The model a judge's verdicts come from: an endpoint's model name, an ``alpaca_eval``
    judge's annotator's (as the package's annotator config names it), a local judge's
    checkpoint."""
    return judge_kind(spec).verdicts_model(spec)


def successors(judges: Mapping[str, Mapping]) -> dict[str, str]:
    """Each retired judge (one with a ``successor``) and the judge acting for it: its
    successor, or that one's successor where it is retired too."""
    acting = {}
    for name, spec in judges.items():
        if "successor" not in spec:
            continue
        chain = [name]
        while "successor" in judges[chain[-1]]:
            successor = judges[chain[-1]]["successor"]
            if successor not in judges:
                raise ConfigError(
                    f"judges.{chain[-1]}.successor: {successor!r} is not a judges entry; declared: {sorted(judges)}"
                )
            if successor in chain:
                raise ConfigError(
                    f"judges.{name}.successor: the succession {' -> '.join(chain + [successor])} is a cycle"
                )
            chain.append(successor)
        acting[name] = chain[-1]
    return acting


def _is_judge_reference(key: str) -> bool:
    """Config keys whose values name ``judges`` entries (``judge``, ``benchmark_judge``,
    ``judges: [...]``, ``graders: [...]``)."""
    return key in ("judge", "judges", "graders") or key.endswith("_judge")


def _replace_judges(node, acting: Mapping[str, str], key: str = ""):
    """``node`` with the retired judges it names (under judge keys) replaced by ``acting``'s."""
    if isinstance(node, Mapping):
        return {k: _replace_judges(value, acting, k) for k, value in node.items()}
    if isinstance(node, list):
        return [_replace_judges(item, acting, key) for item in node]
    if isinstance(node, str) and _is_judge_reference(key):
        return acting.get(node, node)
    return node


def _named_judges(node, key: str = "") -> list[str]:
    """The judges ``node`` names under judge keys."""
    if isinstance(node, Mapping):
        return [name for k, value in node.items() for name in _named_judges(value, k)]
    if isinstance(node, list):
        return [name for item in node for name in _named_judges(item, key)]
    return [node] if isinstance(node, str) and _is_judge_reference(key) else []


def with_successors(config: Mapping) -> dict:
    """``config`` with every judge it names outside ``judges`` that is retired replaced by
    the judge acting for it (:func:`successors`); the ``judges`` entries themselves stay."""
    acting = successors(config.get("judges", {}))
    return {
        section: value if section == "judges" else _replace_judges(value, acting, section)
        for section, value in config.items()
    }


def succeeded_judges(config: Mapping, section: str) -> dict[str, str]:
    """The retired judges that ``config[section]`` names (before :func:`with_successors`),
    each with the judge acting for it."""
    acting = successors(config.get("judges", {}))
    named = _named_judges(config.get(section, {}), section)
    return {name: acting[name] for name in dict.fromkeys(named) if name in acting}


def _exchange(instruction: str, answer: str) -> Conversation:
    return [{"role": "user", "content": instruction}, {"role": "assistant", "content": answer}]


def conversation_of(row: Mapping) -> Conversation:
    """A generation record's conversation: multi-turn records carry theirs; single-turn ones
    are their instruction and answer."""
    conversation = row.get("conversation")
    if conversation:
        return [dict(turn) for turn in conversation]
    if "instruction" not in row:
        raise KeyError(f"generation record {row.get('id')!r} has neither 'conversation' nor 'instruction'")
    return _exchange(row["instruction"], row["text"])
