"""Base models built locally: a tiny model, briefly pretrained (causal LM) on a local corpus."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping

from reprolm.io import atomic_path

log = logging.getLogger(__name__)


def pack(token_lists: list[list[int]], block_size: int) -> list[dict]:
    """Concatenate documents and cut them into equal blocks (the usual LM packing)."""
    stream = [token for tokens in token_lists for token in tokens]
    blocks = [stream[i : i + block_size] for i in range(0, len(stream) - block_size + 1, block_size)]
    return [{"input_ids": b, "attention_mask": [1] * block_size, "labels": list(b)} for b in blocks]


def pretrain(model, tokenizer, texts: list[str], settings: dict, seed: int, output: str) -> dict:
    import torch
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments, default_data_collator

    from reprolm.train.progress import TrainingProgress

    torch.manual_seed(seed)
    ids = [tokenizer(text, add_special_tokens=False).input_ids + [tokenizer.eos_token_id] for text in texts]
    blocks = pack(ids, settings["block_size"])
    with atomic_path(output) as tmp:
        args = TrainingArguments(
            output_dir=str(tmp / "_trainer"),
            max_steps=settings["steps"],
            per_device_train_batch_size=settings["batch_size"],
            learning_rate=settings["learning_rate"],
            lr_scheduler_type="cosine",
            warmup_steps=0.05,
            weight_decay=0.01,
            logging_steps=50,
            save_strategy="no",
            report_to=[],
            disable_tqdm=True,
            seed=seed,
            data_seed=seed,
        )
        trainer = Trainer(
            model=model,
            args=args,
            train_dataset=Dataset.from_list(blocks),
            data_collator=default_data_collator,
            callbacks=[TrainingProgress()],
        )
        result = trainer.train()
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        shutil.rmtree(tmp / "_trainer", ignore_errors=True)
    log.info("pretrained on %d blocks: final loss %.3f", len(blocks), result.training_loss)
    return {"blocks": len(blocks), "train_loss": result.training_loss}


def build_base_model(
    build: Mapping, tokenizer_dir: str, corpus: Mapping[str, str], schemas: Mapping[str, str], seed: int, output: str
) -> dict:
    from reprolm.data.corpus import chat_documents
    from reprolm.models.loading import load_tokenizer
    from reprolm.models.tiny import build_tiny_model

    tokenizer = load_tokenizer(tokenizer_dir)
    model = build_tiny_model(dict(build), tokenizer, seed)
    documents = chat_documents(corpus, schemas, tokenizer)
    log.info(
        "built %s with %d parameters; pretraining on %d documents",
        build["architecture"],
        sum(p.numel() for p in model.parameters()),
        len(documents),
    )
    return pretrain(model, tokenizer, documents, dict(build["pretrain"]), seed, output)
