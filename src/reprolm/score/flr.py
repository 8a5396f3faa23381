"""Follow-up likelihood as reward (FLR): is the user's next turn more likely praise or complaint?

For a conversation that ends with the assistant's answer, every configured follow-up
utterance is appended as the next user turn and scored:

- ``compat: paper`` (default): the mean log-probability of the follow-up's tokens given the
  conversation (the paper's definition);
- ``compat: original``: what the original code computes: the mean of the *raw logits* at a
  single position, ``len(sequence) - len(follow-up ids)``, taken at the follow-up's token ids
  (its BOS included when the tokenizer adds one).

The reward of a category is mean(positive scores) - mean(negative scores); the reward is
the mean over the configured categories.

``format: feedback`` is the fine-tuned variant: roles are swapped, the user opens with
:data:`FEEDBACK_OPENING`, and the follow-up is the assistant's turn (the model was
fine-tuned to give natural-language feedback there).

Scoring is batched: a conversation's prefix runs through the model once and its key-value
cache serves every follow-up, ``batch_size`` follow-ups packed into one forward pass (an
attention mask keeps each to the prefix and itself; no copies of the cache are made). (``compat:
original`` keeps the original's tokenization of each whole sequence; the one position it reads
depends only on the tokens before it, so each distinct prefix runs once, the output head only
at that position, in batches of a token budget sized to the GPU; a few batches' worth of
prefixes are held at a time, so its memory does not grow with the number of conversations.)
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import yaml

from reprolm.registry import Registry

FEEDBACK_OPENING = "Please ask me a question and provide feedback to my answer."
FORMATS = ("chat", "feedback")
# Tokens a conversation is cut to (its start dropped) with its longest follow-up.
MAX_LENGTH = 2048
# Stands in for the follow-up while the chat template is rendered, to find where it starts.
PLACEHOLDER = "\u2063FOLLOW-UP\u2063"
# ``compat: original``: the distinct prefixes held at a time, in batches' worth of tokens.
ORIGINAL_WINDOW_BATCHES = 4
# Its batches' padded tokens on a CPU; on GPUs, a share of the memory the weights leave.
CPU_BATCH_TOKENS = 16384
DEVICE_SHARE = 0.5


def load_followups(path: str | Path, categories: Sequence[str] | None = None) -> dict[str, dict[str, list[str]]]:
    """Follow-ups by category: ``{category: {"positive": [...], "negative": [...]}}``."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    known = data.get("categories") if isinstance(data, Mapping) else None
    if not isinstance(known, Mapping) or not known:
        raise ValueError(f"{path}: expected a 'categories' mapping of category -> positive/negative lists")
    chosen = list(categories) if categories else list(known)
    for category in chosen:
        if category not in known:
            raise ValueError(f"{path}: no follow-up category {category!r}; known: {sorted(known)}")
        for side in ("positive", "negative"):
            utterances = known[category].get(side) if isinstance(known[category], Mapping) else None
            if not utterances or not all(isinstance(u, str) and u for u in utterances):
                raise ValueError(f"{path}: categories.{category}.{side}: expected a non-empty list of strings")
    return {category: {side: list(known[category][side]) for side in ("positive", "negative")} for category in chosen}


def _swap_roles(conversation: Sequence[Mapping]) -> list[dict]:
    swapped = {"user": "assistant", "assistant": "user"}
    return [{"role": "user", "content": FEEDBACK_OPENING}] + [
        {"role": swapped[turn["role"]], "content": turn["content"]} for turn in conversation
    ]


class FollowUpScorer:
    kind = "flr"
    scale = "FLR reward (positive - negative follow-up score)"
    protocol = "FLR: follow-up likelihood as reward; preference = sigmoid(r_answer - r_reference)"

    def __init__(
        self,
        model_path: str,
        followups: Mapping[str, Mapping[str, list[str]]],
        compat: str = "paper",
        format: str = "chat",
        batch_size: int = 16,
        max_length: int = MAX_LENGTH,
        precision: str = "float32",
        batch_tokens: int | None = None,
    ):
        self.scoring = SCORINGS.get(compat, "FLR compat")
        if format not in FORMATS:
            raise ValueError(f"FLR format {format!r}: choose from {FORMATS}")
        from transformers import AutoModelForCausalLM

        from reprolm.models.loading import device_map, from_pretrained, input_device, load_tokenizer, torch_dtype

        self.tokenizer = load_tokenizer(model_path)
        # A judge saved as a LoRA adapter (peft.save: adapter) is merged onto its base.
        self.model = from_pretrained(
            AutoModelForCausalLM, model_path, dtype=torch_dtype(precision), device_map=device_map()
        ).eval()
        self.device = input_device(self.model)
        self.followups, self.format = followups, format
        self.batch_size, self.max_length = batch_size, max_length
        sized, self.row_tokens = device_batch_tokens(self.model, max_length)
        self.batch_tokens = batch_tokens or sized

    @property
    def batching(self) -> dict:
        """What decides its batches (a resumed job reuses saved scores only under the same)."""
        return {"batch_size": self.batch_size, "batch_tokens": self.batch_tokens, "row_tokens": self.row_tokens}

    def _messages(self, conversation: Sequence[Mapping], followup: str) -> list[dict]:
        if self.format == "feedback":
            return _swap_roles(conversation) + [{"role": "assistant", "content": followup}]
        return [dict(turn) for turn in conversation] + [{"role": "user", "content": followup}]

    def _prefix(self, conversation: Sequence[Mapping]) -> list[int]:
        """The conversation's tokens up to where the follow-up starts (shared by all of them)."""
        text = self.tokenizer.apply_chat_template(self._messages(conversation, PLACEHOLDER), tokenize=False)
        return self.tokenizer(text.split(PLACEHOLDER, 1)[0], add_special_tokens=False).input_ids

    def _paper_scores(self, conversation: Sequence[Mapping], targets: list[list[int]]) -> list[float]:
        """Mean log-probability of each follow-up's tokens. The prefix runs once; then up to
        ``batch_size`` follow-ups run packed into one sequence after its cached keys and
        values, each at the positions right after the prefix and masked so that it sees
        the prefix and itself only, exactly as if it had run alone."""
        import torch

        # An over-long conversation loses its beginning, never a follow-up.
        longest = max(map(len, targets))
        if longest >= self.max_length:
            raise ValueError(
                f"FLR max_length {self.max_length} leaves no room for the conversation: "
                f"the longest follow-up has {longest} tokens"
            )
        prefix = self._prefix(conversation)
        prefix = prefix[max(0, len(prefix) + longest - self.max_length) :]
        with torch.no_grad():
            out = self.model(torch.tensor([prefix], device=self.device), use_cache=True)
        cache, width = out.past_key_values, len(prefix)
        first = out.logits[0, -1].float().log_softmax(-1)
        scores = []
        for start in range(0, len(targets), self.batch_size):
            chunk = targets[start : start + self.batch_size]
            flat = torch.tensor([token for target in chunk for token in target], device=self.device)
            owner = torch.repeat_interleave(
                torch.arange(len(chunk), device=self.device), torch.tensor([len(t) for t in chunk], device=self.device)
            )
            offset = torch.cat([torch.arange(len(t), device=self.device) for t in chunk])
            visible = torch.ones(len(flat), width + len(flat), dtype=torch.bool, device=self.device)
            visible[:, width:] = (owner[:, None] == owner[None, :]) & (offset[:, None] >= offset[None, :])
            mask = torch.zeros(visible.shape, dtype=self.model.dtype, device=self.device)
            mask[~visible] = torch.finfo(self.model.dtype).min
            with torch.no_grad():
                logits = (
                    self.model(
                        flat[None],
                        past_key_values=cache,
                        attention_mask=mask[None, None],
                        position_ids=(width + offset)[None],
                    )
                    .logits[0]
                    .float()
                )
            cache.crop(-len(flat))  # back to the prefix for the next chunk
            # Token 0 of a follow-up is predicted by the prefix's last position, token k by its token k-1.
            logprobs = first[flat].clone()
            later = offset[1:] > 0
            logprobs[1:][later] = logits[:-1][later].log_softmax(-1).gather(1, flat[1:][later][:, None])[:, 0]
            totals = torch.zeros(len(chunk), device=self.device).index_add_(0, owner, logprobs)
            scores.extend((totals / torch.tensor([len(t) for t in chunk], device=self.device)).tolist())
        return scores

    def score_alone(self, conversation: Sequence[Mapping], followup: str) -> float:
        """One follow-up's paper score the straightforward way: the whole sequence through
        the model at batch size 1, as the original code runs it. The baseline the batched
        scoring is checked and benchmarked against."""
        import torch

        prefix = self._prefix(conversation)
        target = self.tokenizer(followup, add_special_tokens=False).input_ids
        with torch.no_grad():
            logits = self.model(torch.tensor([prefix + target], device=self.device)).logits[0].float()
        logprobs = logits[len(prefix) - 1 : -1].log_softmax(-1)
        return logprobs.gather(1, torch.tensor(target, device=self.device)[:, None]).mean().item()

    def _original_prefixes(self, conversation: Sequence[Mapping], followups: list[str], targets) -> list[bytes]:
        """Per follow-up, the tokens up to the position the original code reads, ``len(sequence)
        - len(follow-up ids)``, of the chat template's own tokenization of the whole
        conversation plus follow-up (as int32 bytes: a dictionary key, 4 bytes a token; follow-ups
        with the same prefix share one object)."""
        import numpy as np

        distinct: dict[bytes, bytes] = {}
        prefixes = []
        for followup, target in zip(followups, targets, strict=True):
            ids = self.tokenizer.apply_chat_template(
                self._messages(conversation, followup), tokenize=True, return_dict=True
            )["input_ids"]
            prefix = np.asarray(ids[: len(ids) - len(target) + 1], dtype=np.int32).tobytes()
            prefixes.append(distinct.setdefault(prefix, prefix))
        return prefixes

    def _original_scores(self, window: list[list[bytes]], targets: list[list[int]]) -> list[list[float]]:
        """The original code's value for each conversation of ``window`` (its follow-ups'
        prefixes) and follow-up: the mean of the raw logits at the prefix's last position
        over the follow-up's ids. Those logits depend only on the prefix (the model is
        causal), which a conversation's follow-ups largely share: each distinct prefix runs
        through the model once, distinct prefixes of similar length batched up to
        ``batch_tokens`` padded tokens, and the output head runs at that one position only
        (:func:`_head_at`)."""
        import numpy as np
        import torch

        index: dict[bytes, int] = {}
        for prefixes in window:
            for prefix in prefixes:
                index.setdefault(prefix, len(index))
        longest = max(map(len, targets))
        padded = torch.tensor([t + [t[0]] * (longest - len(t)) for t in targets], device=self.device)
        counts = torch.tensor([len(t) for t in targets], device=self.device)
        kept = torch.arange(longest, device=self.device)[None] < counts[:, None]
        means = torch.empty(len(index), len(targets), device=self.device)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        for batch in self._token_batches(sorted(index, key=len)):
            lengths = [len(prefix) // 4 for prefix in batch]
            ids = np.full((len(batch), lengths[-1]), pad, dtype=np.int64)
            for row, prefix in enumerate(batch):
                ids[row, : lengths[row]] = np.frombuffer(prefix, dtype=np.int32)
            ids = torch.from_numpy(ids).to(self.device)
            mask = (torch.arange(lengths[-1])[None] < torch.tensor(lengths)[:, None]).long().to(self.device)
            with torch.no_grad(), _head_at(self.model, torch.tensor(lengths) - 1):
                logits = self.model(input_ids=ids, attention_mask=mask).logits[:, 0].float()
            # Each follow-up's ids read in every row: (rows, follow-ups, longest), padding masked out.
            values = torch.where(kept, logits[:, padded], 0.0).sum(-1) / counts
            means[torch.tensor([index[prefix] for prefix in batch], device=self.device)] = values
        by_prefix = means.tolist()
        return [[by_prefix[index[prefix]][k] for k, prefix in enumerate(prefixes)] for prefixes in window]

    def _token_batches(self, prefixes: list[bytes]) -> Iterator[list[bytes]]:
        """Length-sorted prefixes in batches of at most ``batch_tokens`` padded tokens, a
        row's read logits counted as the tokens their memory would hold."""
        batch: list[bytes] = []
        for prefix in prefixes:
            if batch and (len(batch) + 1) * (len(prefix) // 4 + self.row_tokens) > self.batch_tokens:
                yield batch
                batch = []
            batch.append(prefix)
        if batch:
            yield batch

    def followup_scores(self, conversations: Sequence[Sequence[Mapping]]) -> list[dict[str, dict[str, list[float]]]]:
        """Every follow-up's score, per conversation, category and side."""
        slots = [
            (category, side, utterance)
            for category, sides in self.followups.items()
            for side, utterances in sides.items()
            for utterance in utterances
        ]
        values = self.scoring(self, conversations, [utterance for _, _, utterance in slots])
        scores: list[dict] = []
        for conversation_values in values:
            by_category = {category: {"positive": [], "negative": []} for category in self.followups}
            for (category, side, _), value in zip(slots, conversation_values, strict=True):
                by_category[category][side].append(value)
            scores.append(by_category)
        return scores

    def category_rewards(self, conversations: Sequence[Sequence[Mapping]]) -> list[dict[str, float]]:
        return [
            {
                category: sum(sides["positive"]) / len(sides["positive"])
                - sum(sides["negative"]) / len(sides["negative"])
                for category, sides in scores.items()
            }
            for scores in self.followup_scores(conversations)
        ]

    def score(self, conversations: Sequence[Sequence[Mapping]]) -> list[float]:
        return [sum(rewards.values()) / len(rewards) for rewards in self.category_rewards(conversations)]

    def prefer(self, instructions: Sequence[str], answers: Sequence[str], references: Sequence[str]) -> list[float]:
        """Bradley-Terry on the two rewards, as for a reward model."""
        exchanges = [
            [{"role": "user", "content": i}, {"role": "assistant", "content": a}]
            for i, a in zip(instructions, answers, strict=True)
        ]
        reference_exchanges = [
            [{"role": "user", "content": i}, {"role": "assistant", "content": r}]
            for i, r in zip(instructions, references, strict=True)
        ]
        rewards = self.score(exchanges + reference_exchanges)
        n = len(exchanges)
        return [1.0 / (1.0 + math.exp(rewards[n + k] - rewards[k])) for k in range(n)]


def token_bytes(config, dtype_bytes: int, max_length: int) -> tuple[int, int]:
    """A forward pass's transient memory per padded token (hidden states, the MLP's
    activations, a row of attention scores at ``max_length`` in float32) and per row whose
    logits are read (the head's output and its float32 copy), from the model's config."""
    text = config.get_text_config()
    per_token = dtype_bytes * (6 * text.hidden_size + 3 * text.intermediate_size)
    per_token += 4 * text.num_attention_heads * max_length
    return per_token, text.vocab_size * (dtype_bytes + 8)


def device_batch_tokens(model, max_length: int) -> tuple[int, int]:
    """``compat: original``'s batch size in padded tokens, and a read row's logits as tokens:
    ``DEVICE_SHARE`` of what the weights leave of the smallest GPU the model is on (its total
    memory, not what is free now, so that a retry on the same GPU makes the same batches),
    or ``CPU_BATCH_TOKENS`` on a CPU."""
    import torch

    per_token, per_row = token_bytes(model.config, model.dtype.itemsize, max_length)
    row_tokens = -(-per_row // per_token)
    devices = {p.device for p in model.parameters() if p.device.type == "cuda"}
    if not devices:
        return CPU_BATCH_TOKENS, row_tokens
    left = min(torch.cuda.get_device_properties(d).total_memory - torch.cuda.memory_allocated(d) for d in devices)
    return max(int(DEVICE_SHARE * left) // per_token, max_length + row_tokens), row_tokens


@contextlib.contextmanager
def _head_at(model, positions):
    """The model's output head applied at one position per row (``positions``) instead of
    every position: the hidden states are sliced on their way into it, so the logits are
    (rows, 1, vocabulary) and whatever the model does after its head (soft-capping,
    scaling) still applies."""
    import torch

    def keep(_module, args):
        hidden = args[0]
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        return (hidden[rows, positions.to(hidden.device)][:, None], *args[1:])

    handle = model.get_output_embeddings().register_forward_pre_hook(keep)
    try:
        yield
    finally:
        handle.remove()


def _paper_scoring(scorer: FollowUpScorer, conversations, followups: list[str]) -> list[list[float]]:
    """Each conversation's follow-ups by their tokens' mean log-probability, over the
    prefix's cache."""
    token_ids = {u: scorer.tokenizer(u, add_special_tokens=False).input_ids for u in followups}
    return [scorer._paper_scores(c, [token_ids[u] for u in followups]) for c in conversations]


def _original_scoring(scorer: FollowUpScorer, conversations, followups: list[str]) -> list[list[float]]:
    """Each conversation's follow-ups as the original code scores them: whole sequences,
    conversations taken in windows of ``ORIGINAL_WINDOW_BATCHES`` batches' distinct prefix
    tokens (the only token ids held), each window scored before the next is read."""
    targets = [scorer.tokenizer(followup).input_ids for followup in followups]
    scores: list[list[float]] = []
    window: list[list[bytes]] = []
    tokens = 0
    for conversation in conversations:
        prefixes = scorer._original_prefixes(conversation, followups, targets)
        window.append(prefixes)
        tokens += sum(len(prefix) for prefix in set(prefixes)) // 4
        if tokens >= ORIGINAL_WINDOW_BATCHES * scorer.batch_tokens:
            scores += scorer._original_scores(window, targets)
            window, tokens = [], 0
    if window:
        scores += scorer._original_scores(window, targets)
    return scores


# A judge's ``compat``: how its follow-ups are scored (the module's docstring).
SCORINGS: Registry = Registry("FLR scoring")
SCORINGS.register("paper", _paper_scoring)
SCORINGS.register("original", _original_scoring)
