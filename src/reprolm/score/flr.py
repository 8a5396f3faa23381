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
depends only on the tokens before it, so each distinct prefix runs once.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from reprolm.registry import Registry

FEEDBACK_OPENING = "Please ask me a question and provide feedback to my answer."
FORMATS = ("chat", "feedback")
# Stands in for the follow-up while the chat template is rendered, to find where it starts.
PLACEHOLDER = "\u2063FOLLOW-UP\u2063"


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
        max_length: int = 2048,
        precision: str = "float32",
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

    def _original_scores(self, pairs: list[tuple[Sequence[Mapping], str]]) -> list[float]:
        """The original code's value, on the chat template's own tokenization of each whole
        conversation plus follow-up. The logits it reads, at ``len(sequence) - len(follow-up
        ids)``, depend only on the tokens up to that position (the model is causal), which a
        conversation's follow-ups share: each distinct such prefix runs through the model
        once (distinct prefixes of similar length batched), not each whole sequence."""
        import torch

        target_ids = {followup: self.tokenizer(followup).input_ids for _, followup in pairs}
        rows = []
        for conversation, followup in pairs:
            ids = self.tokenizer.apply_chat_template(
                self._messages(conversation, followup), tokenize=True, return_dict=True
            )["input_ids"]
            targets = target_ids[followup]
            rows.append((tuple(ids[: len(ids) - len(targets) + 1]), targets))
        prefixes = sorted({prefix for prefix, _ in rows}, key=len)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        last_logits = {}
        for start in range(0, len(prefixes), self.batch_size):
            batch = prefixes[start : start + self.batch_size]
            width = len(batch[-1])
            ids = torch.tensor([list(p) + [pad] * (width - len(p)) for p in batch], device=self.device)
            mask = torch.tensor([[1] * len(p) + [0] * (width - len(p)) for p in batch], device=self.device)
            with torch.no_grad():
                logits = self.model(input_ids=ids, attention_mask=mask).logits.float()
            for row, prefix in enumerate(batch):
                last_logits[prefix] = logits[row, len(prefix) - 1]
        return [
            last_logits[prefix][torch.tensor(targets, device=self.device)].mean().item() for prefix, targets in rows
        ]

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


def _paper_scoring(scorer: FollowUpScorer, conversations, followups: list[str]) -> list[list[float]]:
    """Each conversation's follow-ups by their tokens' mean log-probability, over the
    prefix's cache."""
    token_ids = {u: scorer.tokenizer(u, add_special_tokens=False).input_ids for u in followups}
    return [scorer._paper_scores(c, [token_ids[u] for u in followups]) for c in conversations]


def _original_scoring(scorer: FollowUpScorer, conversations, followups: list[str]) -> list[list[float]]:
    """Each conversation's follow-ups as the original code scores them: whole sequences."""
    flat = scorer._original_scores([(c, u) for c in conversations for u in followups])
    return [flat[k * len(followups) : (k + 1) * len(followups)] for k in range(len(conversations))]


# A judge's ``compat``: how its follow-ups are scored (the module's docstring).
SCORINGS: Registry = Registry("FLR scoring")
SCORINGS.register("paper", _paper_scoring)
SCORINGS.register("original", _original_scoring)
