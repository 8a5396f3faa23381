"""A byte-level BPE tokenizer trained on a local corpus, with a chat template."""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from reprolm.io import atomic_path

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")

# Roles as tokens, content on the next line; assistant turns end with EOS so a model
# trained on the template learns to stop.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] }}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
    "{{ '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)


def train_bpe_tokenizer(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BOS, EOS, PAD, *ROLE_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        padding_side="left",
    )
    wrapped.add_tokens(list(ROLE_TOKENS), special_tokens=True)
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def train_tokenizer_from_sources(sources, schemas, vocab_size: int, output: str) -> int:
    from reprolm.data.corpus import plain_texts

    tokenizer = train_bpe_tokenizer(plain_texts(sources, schemas), vocab_size)
    with atomic_path(output) as tmp:
        tokenizer.save_pretrained(str(tmp))
    return len(tokenizer)
