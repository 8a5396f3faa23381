"""Text corpora from raw sources: plain text for tokenizer training, chat-formatted
documents for pretraining (so tiny models learn the chat template before finetuning). Each
source's schema says how its records read as text or as chats."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from reprolm.data.sources import read_all_splits
from reprolm.data.upstream import UPSTREAM_SCHEMAS


def _texts_and_chats(name: str, folder: str, schema_name: str, reader: str) -> Iterator[tuple[str | None, list]]:
    """Each record's plain text (or None) and its chats, by the source's schema."""
    schema = UPSTREAM_SCHEMAS.get(schema_name, f"sources.{name}.schema")
    if schema.text is None and schema.conversations is None:
        schema.adapter("text", f"{reader} (source {name!r})")
    for record in read_all_splits(folder, schema_name):
        yield (
            schema.text(record) if schema.text else None,
            schema.conversations(record) if schema.conversations else [],
        )


def plain_texts(sources: Mapping[str, str], schemas: Mapping[str, str]) -> Iterator[str]:
    for name, folder in sources.items():
        for text, chats in _texts_and_chats(name, folder, schemas[name], "a tokenizer corpus"):
            if text is not None:
                yield text
            for messages in chats:
                for message in messages:
                    yield message["content"]


def chat_documents(sources: Mapping[str, str], schemas: Mapping[str, str], tokenizer) -> list[str]:
    documents = []
    for name, folder in sources.items():
        for text, chats in _texts_and_chats(name, folder, schemas[name], "a pretraining corpus"):
            if text is not None:
                documents.append(text)
            documents += [tokenizer.apply_chat_template(messages, tokenize=False) for messages in chats]
    return documents
