"""Chat prompts as token ids, one rule for every stage that feeds a model a prompt.

A prompt is rendered through the tokenizer's chat template and tokenised once, without the
tokenizer adding special tokens of its own, then holds exactly one BOS where the model
expects one: templates that write ``{{ bos_token }}`` and tokenizers that prepend it would
otherwise give two (what a backend that re-tokenises template output, like vLLM given
strings, does). The tokens that end an assistant turn are read from the template itself.
"""

from __future__ import annotations

# An assistant answer no template changes, to find what the template writes after it.
TURN_PROBE = "reprolm turn probe"


def expects_bos(tokenizer) -> bool:
    """Whether the tokenizer's own encoding starts text with BOS (the model was trained so)."""
    bos = tokenizer.bos_token_id
    return bos is not None and tokenizer("a").input_ids[:1] == [bos]


def prompt_token_ids(tokenizer, text: str) -> list[int]:
    """``text`` (already through the chat template) as ids with exactly one leading BOS when
    the template wrote one or the model expects one, and none otherwise."""
    ids = tokenizer(text, add_special_tokens=False).input_ids
    bos = tokenizer.bos_token_id
    if bos is None:
        return ids
    leading = 0
    while leading < len(ids) and ids[leading] == bos:
        leading += 1
    if leading or expects_bos(tokenizer):
        return [bos, *ids[leading:]]
    return ids


def tokenizer_prompt_token_ids(tokenizer, text: str) -> list[int]:
    """``text`` (already through the chat template) as the tokenizer's own encoding gives
    it, special tokens added: what a backend handed the rendered string does (vLLM given
    a string, as Ruler's run_exp.py generated), so a template that writes BOS gets a second
    one from a tokenizer that prepends it (Llama-3, Mistral, Gemma, DeepSeek)."""
    return tokenizer(text).input_ids


# How a prompt set's rendered prompts become ids (``promptsets.*.prompt_bos``): ``one`` BOS
# (the default), or the tokenizer's own encoding of the text, BOS doubled where the template
# wrote one too (the original Ruler's generation).
PROMPT_BOS = {"one": prompt_token_ids, "tokenizer": tokenizer_prompt_token_ids}


def chat_prompt(tokenizer, messages: list[dict]) -> tuple[str, list[int]]:
    """The conversation so far, ready for the assistant's answer: its text and its ids."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return text, prompt_token_ids(tokenizer, text)


def _special_ids(tokenizer) -> set[int]:
    added = {index for index, token in tokenizer.added_tokens_decoder.items() if token.special}
    return set(tokenizer.all_special_ids) | added


def end_of_turn_ids(tokenizer) -> list[int]:
    """The special token the chat template writes right after an assistant's answer
    (``<|eot_id|>``, ``<|im_end|>``, ``<end_of_turn>``, or EOS), if there is one."""
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hello"}, {"role": "assistant", "content": TURN_PROBE}], tokenize=False
    )
    position = rendered.rfind(TURN_PROBE)
    if position == -1:
        raise ValueError("the chat template does not write the assistant's answer; cannot find its end-of-turn token")
    after = tokenizer(rendered[position + len(TURN_PROBE) :], add_special_tokens=False).input_ids
    special = _special_ids(tokenizer)
    for token in after:
        if token in special:
            return [token]
        if tokenizer.decode([token]).strip():
            break
    return []


def stop_token_ids(tokenizer, generation_eos: list[int] | int | None = None, extra_tokens: list[str] = ()) -> list[int]:
    """Every token id that ends a sample: EOS, the model's generation-config EOS ids, the
    template's end of turn, and ``extra_tokens`` (each must be one special token, like an
    MLT), in that order without repeats."""
    ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    if isinstance(generation_eos, int):
        generation_eos = [generation_eos]
    ids += list(generation_eos or []) + end_of_turn_ids(tokenizer)
    special = _special_ids(tokenizer)
    for token in extra_tokens:
        index = tokenizer.convert_tokens_to_ids(token)
        if index is None or index not in special:
            raise ValueError(
                f"stop token {token!r} is not a special token of this tokenizer "
                "(stops are token ids, so each must be one token)"
            )
        ids.append(index)
    return list(dict.fromkeys(ids))
