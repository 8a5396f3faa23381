"""Prompt sets: dataset rows -> final prompt strings, stop tokens and token handling.

A prompt builder sees the row, the tokenizer (for its chat template), what the model was
trained for (``length_prompt`` of its recipe: ``mlt`` or ``instruction``) and the length
targets. Builders are registered by name so studies add their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from reprolm.length import TargetSet, reads_length_targets
from reprolm.registry import Registry


@dataclass
class PromptBatch:
    prompts: list[str]
    # Special tokens that end a sample besides EOS and the template's end of turn.
    stop_tokens: list[str] = field(default_factory=list)
    skip_special_tokens: bool = True


def chat_prompt(tokenizer, user: str) -> str:
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
    )


def word_count_instruction(instruction: str, target_name: str, targets: TargetSet) -> str:
    """The baseline prompt: the instruction plus the requested word count."""
    phrase = targets[target_name].instruction()
    return f"{instruction}\nThe response should have a word count of {phrase} words."


@reads_length_targets
def target_length_prompts(rows, tokenizer, length_prompt: str, targets: TargetSet) -> PromptBatch:
    """Ruler models: the assistant header followed by the target's MLT, stopping at any
    further MLT. Other models: the word-count instruction through the chat template."""
    if length_prompt == "mlt":
        prompts = [chat_prompt(tokenizer, r["Instruction"]) + targets[r["TargetLength"]].mlt for r in rows]
        return PromptBatch(prompts, stop_tokens=targets.mlt_tokens)
    prompts = [
        chat_prompt(tokenizer, word_count_instruction(r["Instruction"], r["TargetLength"], targets)) for r in rows
    ]
    return PromptBatch(prompts)


def self_length_prompts(rows, tokenizer, length_prompt: str, targets: TargetSet) -> PromptBatch:
    """No target given: the model writes its own MLT first, so special tokens are kept."""
    return PromptBatch([chat_prompt(tokenizer, r["Instruction"]) for r in rows], skip_special_tokens=False)


def instruction_prompts(rows, tokenizer, length_prompt: str, targets: TargetSet) -> PromptBatch:
    """The row's ``instruction`` through the chat template, nothing added."""
    return PromptBatch([chat_prompt(tokenizer, r["instruction"]) for r in rows])


PROMPT_BUILDERS: Registry[Callable[..., PromptBatch]] = Registry("prompt kind")
PROMPT_BUILDERS.register("target_length", target_length_prompts)
PROMPT_BUILDERS.register("self_length", self_length_prompts)
PROMPT_BUILDERS.register("chat", instruction_prompts)
# Prompt kinds asked turn by turn, each turn after the model's own earlier answers.
MULTI_TURN = "multi_turn"


def build_prompts(
    kind: str, rows: list[Mapping], tokenizer, length_prompt: str, targets: TargetSet | None
) -> PromptBatch:
    return PROMPT_BUILDERS.get(kind)(rows, tokenizer, length_prompt, targets)
