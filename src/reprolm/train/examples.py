"""Tokenised training examples: a chat prompt and a completion, loss on the completion.

The prompt goes through the tokenizer's chat template with the generation prompt; the
completion (for Ruler: ``{mlt}{output}``) follows it and ends as the template ends an
assistant turn (``<|eot_id|>``, ``<|im_end|>``...; EOS where the template writes none), so
the model learns to stop where generation stops it. Labels start exactly at the first
completion token, so a Ruler model learns to emit the MLT itself. If truncation removes the
first completion token, every label is masked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from reprolm.models.chat import chat_prompt, end_of_turn_ids, prompt_token_ids
from reprolm.registry import Registry

IGNORE_INDEX = -100


def prompt_ids(tokenizer, messages: list[dict]) -> list[int]:
    """The prompt as generation will see it (one rule: ``reprolm.models.chat``)."""
    return chat_prompt(tokenizer, messages)[1]


# The last tokenizer's answer end: (tokenizer, its template, its size) -> ids. Rendering the
# template to find it costs more than tokenising a row, and every row of a build asks.
_answer_end: dict[tuple, list[int]] = {}


def answer_end_ids(tokenizer) -> list[int]:
    """What ends an answer: the template's end-of-turn token, or EOS where it writes none."""
    key = (tokenizer, tokenizer.chat_template, len(tokenizer))
    if key not in _answer_end:
        _answer_end.clear()
        _answer_end[key] = end_of_turn_ids(tokenizer) or [tokenizer.eos_token_id]
    return _answer_end[key]


def completion_example(
    tokenizer, messages: list[dict], completion: str, max_length: int, loss_on_prompt: bool = False
) -> dict:
    prompt = prompt_ids(tokenizer, messages)
    answer = tokenizer(completion, add_special_tokens=False).input_ids + answer_end_ids(tokenizer)
    input_ids = (prompt + answer)[:max_length]
    if loss_on_prompt:
        labels = list(input_ids)
    else:
        labels = ([IGNORE_INDEX] * len(prompt) + answer)[:max_length]
    return {"input_ids": input_ids, "attention_mask": [1] * len(input_ids), "labels": labels}


def _completion_format(to_chat: Callable[[Mapping, Mapping], tuple[list[dict], str]]):
    """A format that turns a row into (prompt messages, completion), loss on the completion."""

    def example(tokenizer, record: Mapping, recipe: Mapping) -> dict:
        messages, completion = to_chat(record, recipe)
        return completion_example(
            tokenizer, messages, completion, recipe["max_length"], loss_on_prompt=recipe.get("loss_on_prompt", False)
        )

    return example


def instruction_response(record: Mapping, recipe: Mapping) -> tuple[list[dict], str]:
    """Ruler-schema rows ``{Instruction, output, mlt}``; ``completion_prefix: mlt`` adds the MLT."""
    prefix = record["mlt"] if recipe.get("completion_prefix") == "mlt" else ""
    return [{"role": "user", "content": record["Instruction"]}], prefix + record["output"]


def conversation(record: Mapping, recipe: Mapping) -> tuple[list[dict], str]:
    """Rows with ``messages`` ending with an assistant turn: the loss is on that last turn."""
    messages = [dict(turn) for turn in record["messages"]]
    if not messages or messages[-1]["role"] != "assistant":
        raise KeyError("messages ending with an assistant turn")
    return messages[:-1], messages[-1]["content"]


def assistant_spans_example(tokenizer, messages: list[dict], max_length: int) -> dict:
    """A whole chat with the loss on every assistant turn's content and end of turn; the
    assistant header and every other turn are masked. Span boundaries come from rendering
    the chat template up to each assistant turn."""

    def ids(turns, generation_prompt):
        text = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=generation_prompt)
        return prompt_token_ids(tokenizer, text)

    input_ids = ids(messages, False)
    labels = [IGNORE_INDEX] * len(input_ids)
    for index, turn in enumerate(messages):
        if turn["role"] == "assistant":
            start, end = len(ids(messages[:index], True)), len(ids(messages[: index + 1], False))
            labels[start:end] = input_ids[start:end]
    input_ids, labels = input_ids[:max_length], labels[:max_length]
    return {"input_ids": input_ids, "attention_mask": [1] * len(input_ids), "labels": labels}


def chat_messages(tokenizer, record: Mapping, recipe: Mapping) -> dict:
    """Rows with ``messages``: the loss on every assistant turn (GEM's chats)."""
    messages = record.get("messages")
    if not messages or not any(turn.get("role") == "assistant" for turn in messages):
        raise KeyError("'messages' with at least one assistant turn")
    return assistant_spans_example(tokenizer, [dict(t) for t in messages], recipe["max_length"])


# A recipe's ``format``: how a training row becomes one tokenised example.
FORMATS: Registry[Callable[..., dict]] = Registry("training format")
FORMATS.register("instruction_response", _completion_format(instruction_response))
FORMATS.register("conversation", _completion_format(conversation))
FORMATS.register("chat_messages", chat_messages)


def build_examples(tokenizer, records: list[dict], recipe: Mapping, source: str) -> list[dict]:
    make = FORMATS.get(recipe["format"], "recipe format")
    examples = []
    for row, record in enumerate(records):
        try:
            examples.append(make(tokenizer, record, recipe))
        except KeyError as missing:
            raise KeyError(f"{source}: row {row}: missing field {missing}") from None
    return examples
