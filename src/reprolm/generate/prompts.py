"""Prompt sets: dataset rows -> the conversations a model is asked, stop tokens and token
handling.

A prompt builder sees the rows, what the model was trained for (``length_prompt`` of its
recipe: ``mlt`` or ``instruction``) and the length targets, and returns each prompt as
messages (and text the assistant's turn starts with, Ruler's MLT). A model with weights gets
them through its chat template (:meth:`PromptBatch.texts`); a chat endpoint gets the messages
and renders its own. Builders are registered by name so studies add their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from reprolm.length import TargetSet, reads_length_targets
from reprolm.registry import Registry


@dataclass
class PromptBatch:
    # Each prompt's messages, ending with the user's turn.
    conversations: list[list[dict]]
    # Text each assistant turn starts with, after the template's generation prompt ("" for none).
    assistant_prefixes: list[str] = field(default_factory=list)
    # Special tokens that end a sample besides EOS and the template's end of turn.
    stop_tokens: list[str] = field(default_factory=list)
    skip_special_tokens: bool = True

    def texts(self, tokenizer) -> list[str]:
        """The prompts through ``tokenizer``'s chat template, each with its assistant prefix."""
        prefixes = self.assistant_prefixes or [""] * len(self.conversations)
        return [
            tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + prefix
            for messages, prefix in zip(self.conversations, prefixes, strict=True)
        ]


# What a generation reads of its prompt set, and of its model's recipe (the rest of a recipe
# is the finetune's): a generation's params hold these and nothing else of them.
PROMPTSET_KEYS = ("prompt", "template", "sampling", "category_sampling")
RECIPE_KEYS = ("length_prompt",)

# Registered where each is defined, so that a generation's code is its own prompt kind's
# (reprolm.provenance.fingerprint): editing one regenerates only the prompt sets it builds.
PROMPT_BUILDERS: Registry[Callable[..., PromptBatch]] = Registry("prompt kind", per_job=True)


def user_turn(user: str) -> list[dict]:
    return [{"role": "user", "content": user}]


def word_count_instruction(instruction: str, target_name: str, targets: TargetSet) -> str:
    """The baseline prompt: the instruction plus the requested word count."""
    phrase = targets[target_name].instruction()
    return f"{instruction}\nThe response should have a word count of {phrase} words."


@PROMPT_BUILDERS.register("target_length")
@reads_length_targets()
def target_length_prompts(rows, length_prompt: str, targets: TargetSet) -> PromptBatch:
    """Ruler models: the assistant header followed by the target's MLT, stopping at any
    further MLT. Other models: the word-count instruction as the user's turn."""
    if length_prompt == "mlt":
        return PromptBatch(
            [user_turn(r["Instruction"]) for r in rows],
            assistant_prefixes=[targets[r["TargetLength"]].mlt for r in rows],
            stop_tokens=targets.mlt_tokens,
        )
    return PromptBatch([user_turn(word_count_instruction(r["Instruction"], r["TargetLength"], targets)) for r in rows])


@PROMPT_BUILDERS.register("self_length")
def self_length_prompts(rows, length_prompt: str, targets: TargetSet) -> PromptBatch:
    """No target given: the model writes its own MLT first, so special tokens are kept."""
    return PromptBatch([user_turn(r["Instruction"]) for r in rows], skip_special_tokens=False)


@PROMPT_BUILDERS.register("chat")
def instruction_prompts(rows, length_prompt: str, targets: TargetSet) -> PromptBatch:
    """The row's ``instruction`` as the user's turn, nothing added."""
    return PromptBatch([user_turn(r["instruction"]) for r in rows])


# Prompt kinds asked turn by turn, each turn after the model's own earlier answers.
MULTI_TURN = "multi_turn"


def build_prompts(kind: str, rows: list[Mapping], length_prompt: str, targets: TargetSet | None) -> PromptBatch:
    return PROMPT_BUILDERS.get(kind)(rows, length_prompt, targets)
