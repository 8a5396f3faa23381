"""Text corpora from raw sources: plain text for tokenizer training, chat-formatted
documents for pretraining (so tiny models learn the chat template before finetuning)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from reprolm.data.sources import read_all_splits

ROLES = {"human": "user", "gpt": "assistant", "system": "system"}


def conversations(record: Mapping, schema: str) -> list[list[dict]]:
    """A record as chat messages, for the schemas that hold dialogue."""
    if schema == "openhermes_conversations":
        return [[{"role": ROLES.get(t["from"], "user"), "content": t["value"]} for t in record["conversations"]]]
    if schema == "longform":
        return [[{"role": "user", "content": record["input"]}, {"role": "assistant", "content": record["output"]}]]
    if schema == "eli5":
        return [[{"role": "user", "content": record["title"]}, {"role": "assistant", "content": answer}]
                for answer in record["answers"]["text"]]
    if schema == "arena_question":
        return [[{"role": "user", "content": turn["content"]} for turn in record["turns"]]]
    return []


def plain_texts(sources: Mapping[str, str], schemas: Mapping[str, str]) -> Iterator[str]:
    for name, folder in sources.items():
        for record in read_all_splits(folder, schemas[name]):
            if schemas[name] == "text":
                yield record["text"]
            for messages in conversations(record, schemas[name]):
                for message in messages:
                    yield message["content"]


def chat_documents(sources: Mapping[str, str], schemas: Mapping[str, str], tokenizer) -> list[str]:
    documents = []
    for name, folder in sources.items():
        for record in read_all_splits(folder, schemas[name]):
            if schemas[name] == "text":
                documents.append(record["text"])
            for messages in conversations(record, schemas[name]):
                documents.append(tokenizer.apply_chat_template(messages, tokenize=False))
    return documents
