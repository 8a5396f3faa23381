"""The shared finetune stage: one Trainer-based loop for every SFT recipe.

Runs in-process on CPU, or under torchrun / the deepspeed launcher (see ``launch``) with a
DeepSpeed config on GPUs. Checkpoints go to a folder keyed by the run's spec, so a killed
run resumes from its latest checkpoint and a changed recipe never resumes a stale one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from reprolm.provenance import atomic_path

log = logging.getLogger(__name__)

TRAINING_KEYS = (
    "learning_rate", "num_train_epochs", "per_device_train_batch_size",
    "gradient_accumulation_steps", "lr_scheduler_type", "warmup_ratio", "weight_decay",
    "adam_beta2", "max_steps", "logging_steps", "save_steps", "gradient_checkpointing",
)


@dataclass
class FinetuneSpec:
    base_model: str
    output_dir: str
    checkpoint_root: str
    train_file: str
    recipe: dict
    seed: int = 0
    add_tokens: list[str] = field(default_factory=list)
    deepspeed: str | None = None
    precision: str = "float32"  # bfloat16 on GPUs
    chat_template: str | None = None

    def key(self) -> str:
        """What determines the trained weights; names the checkpoint folder."""
        material = asdict(self)
        for volatile in ("output_dir", "checkpoint_root"):
            material.pop(volatile)
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def checkpoint_dir(self) -> Path:
        return Path(self.checkpoint_root) / self.key()

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2, sort_keys=True))

    @classmethod
    def load(cls, path: str | Path) -> "FinetuneSpec":
        return cls(**json.loads(Path(path).read_text()))


def latest_checkpoint(folder: Path) -> str | None:
    checkpoints = sorted(folder.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    return str(checkpoints[-1]) if checkpoints else None


def training_arguments(spec: FinetuneSpec):
    from transformers import TrainingArguments

    recipe = spec.recipe
    settings = {k: recipe[k] for k in TRAINING_KEYS if k in recipe}
    # transformers 5 takes a warm-up ratio as a float warmup_steps below 1.
    if "warmup_ratio" in settings:
        settings["warmup_steps"] = float(settings.pop("warmup_ratio"))
    settings.setdefault("logging_steps", 10)
    save_steps = settings.pop("save_steps", None)
    return TrainingArguments(
        output_dir=str(spec.checkpoint_dir),
        seed=spec.seed,
        data_seed=spec.seed,
        bf16=spec.precision == "bfloat16",
        deepspeed=spec.deepspeed,
        save_strategy="steps" if save_steps else "epoch",
        save_steps=save_steps or 500,
        save_total_limit=2,
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
        remove_unused_columns=False,
        **settings,
    )


def run(spec: FinetuneSpec) -> None:
    import pyarrow.parquet as pq
    import torch
    from datasets import Dataset
    from transformers import DataCollatorForSeq2Seq, Trainer

    from reprolm.models.loading import load_causal_lm, load_tokenizer, torch_dtype
    from reprolm.train.examples import build_examples

    torch.manual_seed(spec.seed)
    tokenizer = load_tokenizer(spec.base_model, spec.chat_template)
    if spec.add_tokens:
        tokenizer.add_tokens(spec.add_tokens, special_tokens=True)
    model = load_causal_lm(spec.base_model, dtype=None).train()
    if spec.add_tokens:
        model.resize_token_embeddings(len(tokenizer))
    if spec.precision != "float32" and not spec.deepspeed:
        model = model.to(torch_dtype(spec.precision))

    records = pq.read_table(spec.train_file).to_pylist()
    examples = build_examples(tokenizer, records, spec.recipe, spec.train_file)
    trainable = [e for e in examples if any(label != -100 for label in e["labels"])]
    log.info("%d training examples (%d fully masked by truncation)", len(trainable), len(examples) - len(trainable))

    trainer = Trainer(
        model=model,
        args=training_arguments(spec),
        train_dataset=Dataset.from_list(trainable),
        data_collator=DataCollatorForSeq2Seq(tokenizer, label_pad_token_id=-100, padding=True),
        processing_class=tokenizer,
    )
    resume = latest_checkpoint(spec.checkpoint_dir)
    if resume:
        log.info("resuming from %s", resume)
    trainer.train(resume_from_checkpoint=resume)
    if trainer.is_world_process_zero():
        with atomic_path(spec.output_dir) as tmp:
            trainer.save_model(str(tmp))
            tokenizer.save_pretrained(str(tmp))
        shutil.rmtree(spec.checkpoint_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point for launchers: ``python -m reprolm.train.finetune SPEC.json``."""
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    run(FinetuneSpec.load(argv[0]))


if __name__ == "__main__":
    main()
