"""Tokenised training examples: a chat prompt and a completion, loss on the completion.

The prompt goes through the tokenizer's chat template with the generation prompt; the
completion (for Ruler: ``{mlt}{output}``) follows it and ends with EOS. Labels start
exactly at the first completion token, so a Ruler model learns to emit the MLT itself.
If truncation removes the first completion token, every label is masked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

IGNORE_INDEX = -100


def prompt_ids(tokenizer, messages: list[dict]) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False).input_ids


def completion_example(tokenizer, messages: list[dict], completion: str, max_length: int,
                       loss_on_prompt: bool = False) -> dict:
    prompt = prompt_ids(tokenizer, messages)
    answer = tokenizer(completion, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
    input_ids = (prompt + answer)[:max_length]
    if loss_on_prompt:
        labels = list(input_ids)
    else:
        labels = ([IGNORE_INDEX] * len(prompt) + answer)[:max_length]
    return {"input_ids": input_ids, "attention_mask": [1] * len(input_ids), "labels": labels}


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


FORMATS: dict[str, Callable[[Mapping, Mapping], tuple[list[dict], str]]] = {
    "instruction_response": instruction_response,
    "conversation": conversation,
}


def register_format(name: str, function) -> None:
    FORMATS[name] = function


def build_examples(tokenizer, records: list[dict], recipe: Mapping, source: str) -> list[dict]:
    try:
        to_chat = FORMATS[recipe["format"]]
    except KeyError:
        raise ValueError(f"unknown training format {recipe.get('format')!r}; known: {sorted(FORMATS)}") from None
    examples = []
    for row, record in enumerate(records):
        try:
            messages, completion = to_chat(record, recipe)
        except KeyError as missing:
            raise KeyError(f"{source}: row {row}: missing field {missing}") from None
        examples.append(completion_example(
            tokenizer, messages, completion, recipe["max_length"],
            loss_on_prompt=recipe.get("loss_on_prompt", False),
        ))
    return examples
