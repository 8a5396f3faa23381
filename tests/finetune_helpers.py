"""A tiny base model and a Ruler-schema train file for finetune tests."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

MLT_TOKENS = ["[MLT:10]", "[MLT:30]", "[MLT:50]"]
TRAIN_ROWS = 48


def tiny_finetune_inputs(root: Path) -> None:
    """``root/base`` (a 2-layer Llama with its BPE tokenizer) and ``root/train.parquet``."""
    from reprolm.data.fixture_world import passage, question
    from reprolm.models.tiny import build_tiny_model
    from reprolm.models.tokenizer import train_bpe_tokenizer

    rng = random.Random(0)
    texts = [passage(rng, 40) for _ in range(200)] + [question(rng) for _ in range(200)]
    tokenizer = train_bpe_tokenizer(texts, vocab_size=400)
    model = build_tiny_model(
        {
            "architecture": "llama",
            "hidden_size": 32,
            "num_layers": 2,
            "num_heads": 2,
            "intermediate_size": 64,
            "max_positions": 256,
        },
        tokenizer,
        seed=0,
    )
    tokenizer.save_pretrained(root / "base")
    model.save_pretrained(root / "base")
    rows = [
        {"Instruction": question(rng), "output": passage(rng, rng.randint(5, 25)), "mlt": rng.choice(MLT_TOKENS)}
        for _ in range(TRAIN_ROWS)
    ]
    pq.write_table(pa.Table.from_pylist(rows), root / "train.parquet")


def tiny_preference_inputs(root: Path, n: int, seed: int) -> dict[str, list[dict]]:
    """``tiny_finetune_inputs`` plus fixture preference pairs, each split also written as
    ``root/{split}.parquet``; the pairs by split."""
    from reprolm.data.builders import BUILDERS, BuildContext
    from reprolm.data.sources import write_source

    tiny_finetune_inputs(root)
    write_source({"schema": "ultrafeedback_binarized", "fixture": {"n": n, "seed": seed}}, root / "raw")
    built = BUILDERS["preference_pairs"](
        BuildContext({"prefs": root / "raw"}, {"prefs": "ultrafeedback_binarized"}, {})
    )
    for split, records in built.items():
        pq.write_table(pa.Table.from_pylist(records), root / f"{split}.parquet")
    return built
