"""Train-before-test (LM-Harmony): fine-tune on a benchmark's training split, evaluate
zero-shot through lm-eval before training and after every epoch, and report the test score
at the epoch with the best validation score.

Splits follow the study's code: a task with both validation and test documents uses
train/validation/test; otherwise its training documents are split 80/20 (numpy permutation,
seed 0) into train/valid and its evaluation documents are the test set. Each set is then
capped by a seeded permutation. Evaluation always goes through lm-eval's own task definition;
the chosen documents are handed to it as local parquet files of the evaluated split.

On GPUs the model trains and is evaluated where it was placed (the study's
``device_map="auto"``: one process, layers over the granted GPUs), in float32 weights with
bf16 autocast; every epoch is checkpointed, and so is the step a stop signal arrives in
(reprolm.stopping), so a retried job resumes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from reprolm.io import atomic_path
from reprolm.provenance import recorded_hash
from reprolm.score.lm_eval_bridge import (
    TaskSpec,
    build_task,
    builtin_task_config,
    eval_split,
    evaluate_tasks,
    wandb_logger,
)
from reprolm.train.finetune import TRAINER_STATE, latest_checkpoint
from reprolm.train.precision import mixed_precision
from reprolm.train.tracking import run_name

log = logging.getLogger(__name__)

PROGRESS_FILE = "evaluations.json"


def _cap(dataset, cap: int | None, seed: int):
    if cap is None or cap < 0 or len(dataset) <= cap:
        return dataset
    np.random.seed(seed)
    return dataset.select(np.random.permutation(len(dataset))[:cap])


@dataclass
class HarmonySplits:
    """Raw documents (upstream schema) of each set, and the task they belong to."""

    task: object  # lm-eval ConfigurableTask
    train: object  # datasets.Dataset
    valid: object
    test: object

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "valid": len(self.valid), "test": len(self.test)}


def harmony_splits(spec: TaskSpec, caps: Mapping[str, int | None], seed: int = 0) -> HarmonySplits:
    task = build_task(spec)
    config = task.config
    if not config.training_split:
        raise ValueError(f"lm-eval task {spec.task!r} has no training split; train-before-test needs one")
    dataset = task.dataset
    train = dataset[config.training_split]
    if config.validation_split and config.test_split:
        valid, test = dataset[config.validation_split], dataset[config.test_split]
    else:
        np.random.seed(seed)
        order = np.random.permutation(len(train))
        n_train, n_valid = int(0.8 * len(train)), int(0.2 * len(train))
        valid = train.select(order[n_train : n_train + n_valid])
        train = train.select(order[:n_train])
        test = dataset[config.test_split or config.validation_split]
    return HarmonySplits(
        task=task,
        train=_cap(train, caps.get("max_num_train"), seed),
        valid=_cap(valid, caps.get("max_num_valid"), seed),
        test=_cap(test, caps.get("max_num_test"), seed),
    )


def processed(task, raw):
    """The task's own ``process_docs`` applied, as lm-eval does before templating."""
    process = task.config.process_docs
    return process(raw) if callable(process) else raw


def training_example(task, doc: Mapping) -> tuple[str, str]:
    """(question, target) from the task's own templates.

    An integer target indexes the task's choices. A ``doc_to_text`` that returns an index
    (lm-eval's multiple-input tasks, e.g. Winogrande) selects the correct filled-in prefix,
    which the continuation then follows.
    """
    question = task.doc_to_text(doc)
    target = task.doc_to_target(doc)
    if isinstance(question, int):
        return task.doc_to_choice(doc)[question], str(target)
    if task.config.doc_to_choice is not None and isinstance(target, int):
        target = task.doc_to_choice(doc)[target]
    elif isinstance(target, list):
        target = " ".join(target)
    return question, str(target)


def training_records(task, raw, *, chat_template: bool, completion_only: bool, tokenizer=None) -> list[dict]:
    """TRL SFT records: ``text`` (loss on the whole sequence) or ``prompt``/``completion``
    (loss on the target only), optionally through the chat template (user = question,
    assistant = target)."""
    records = []
    for doc in processed(task, raw):
        question, target = training_example(task, doc)
        if chat_template:
            prompt = tokenizer.apply_chat_template(
                [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
            )
            completion = target + tokenizer.eos_token
        else:
            prompt, completion = question, " " + target
        records.append(
            {"prompt": prompt, "completion": completion} if completion_only else {"text": prompt + completion}
        )
    return records


def _write_eval_docs(raw, spec: TaskSpec, folder: Path) -> Path:
    """The documents as the split lm-eval scores, so its own task config reads them."""
    folder.mkdir(parents=True, exist_ok=True)
    split = eval_split(builtin_task_config(spec.task, yaml=spec.yaml))
    pq.write_table(pa.Table.from_pylist(raw.to_list()), folder / f"{split}.parquet")
    return folder


class EpochEvaluator:
    """Scores the in-memory model on the valid and test sets (no reload between epochs)."""

    def __init__(
        self,
        spec: TaskSpec,
        splits: HarmonySplits,
        workdir: Path,
        batch_size: int,
        seed: int,
        chat_template: bool,
        logger=None,
    ):
        def zero_shot_on(docs, name: str) -> TaskSpec:
            """The task, zero-shot, on ``docs`` written to their own folder."""
            written = _write_eval_docs(docs, spec, workdir / name)
            return replace(spec, num_fewshot=0, data_dir=written, limit=None)

        self.valid, self.test = zero_shot_on(splits.valid, "valid"), zero_shot_on(splits.test, "test")
        self.batch_size, self.seed, self.chat_template = batch_size, seed, chat_template
        # lm-eval's W&B logger: each evaluation labelled with its set (boolq-valid, boolq-test).
        self.logger = logger

    def __call__(self, model, tokenizer) -> dict[str, float]:
        was_training = model.training
        model.eval()
        scores = {}
        for name, spec in (("valid", self.valid), ("test", self.test)):
            result = evaluate_tasks(
                model,
                tokenizer,
                [spec],
                batch_size=self.batch_size,
                seed=self.seed,
                bootstrap_iters=0,
                apply_chat_template=self.chat_template,
                logger=self.logger,
                log_label=name,
            )
            scores[name] = result["tasks"][spec.name]["value"]
        if was_training:
            model.train()
        return scores


def best_epoch(epochs: list[dict]) -> dict:
    """The epoch with the highest validation score (the earliest on ties)."""
    return max(epochs, key=lambda e: (e["valid"], -e["epoch"]))


def run_key(model_path: str, spec: TaskSpec, recipe: Mapping, seed: int) -> str:
    """What determines a run's training and scores; names its checkpoint folder, so that a
    retry resumes only its own run."""
    material = {
        "model_sha256": recorded_hash(model_path),
        "model": str(model_path),
        "task": spec.task,
        "metric": spec.metric,
        "docs_sha256": recorded_hash(spec.data_dir) if spec.data_dir else None,
        "gen_kwargs": spec.gen_kwargs,
        "recipe": dict(recipe),
        "seed": seed,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:16]


def place_for_training(model_path: str, gpus: int):
    """The model in float32 (the optimiser's master weights; bf16 and fp16 are autocast), on
    the CPU, one GPU, or spread over the granted GPUs as the study's code does
    (``device_map="auto"``, one process). The Trainer would wrap a model that sits on one of
    several visible GPUs in ``nn.DataParallel`` (a full copy per GPU), hence the refusal."""
    import torch
    from transformers import AutoModelForCausalLM

    from reprolm.models.loading import device_map, trusts_remote_code

    model = AutoModelForCausalLM.from_pretrained(
        model_path, dtype=torch.float32, device_map=device_map(gpus), trust_remote_code=trusts_remote_code(model_path)
    )
    used = {d for d in (getattr(model, "hf_device_map", None) or {}).values() if d not in ("cpu", "disk")}
    if gpus > 1 and len(used) < 2:
        raise ValueError(
            f"{model_path}: train-before-test was granted {gpus} GPUs but the model fits on one; "
            "grant it 1 (resources.train_before_test.gpus)"
        )
    return model


class EpochProgress:
    """The direct and per-epoch scores, kept beside the checkpoints (written before the
    epoch's checkpoint is), so that a resumed run neither repeats an evaluation nor loses one."""

    def __init__(self, folder: Path):
        self.path = folder / PROGRESS_FILE
        saved = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.direct: dict | None = saved.get("direct")
        self.epochs: list[dict] = saved.get("epochs", [])

    def resume_at(self, checkpoint: str | None) -> None:
        """Forget epochs after the checkpoint a run resumes from (they will be trained again)."""
        last = json.loads((Path(checkpoint) / TRAINER_STATE).read_text())["epoch"] if checkpoint else 0
        # A checkpoint saved on a stop signal sits inside an epoch (e.g. 1.5): epoch 1 is done.
        self.epochs = [e for e in self.epochs if e["epoch"] <= math.floor(last + 1e-6)]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(self.path) as tmp:
            tmp.write_text(json.dumps({"direct": self.direct, "epochs": self.epochs}, indent=2) + "\n")


def train_before_test(
    *,
    model_path: str,
    spec: TaskSpec,
    recipe: Mapping,
    seed: int,
    output: str,
    checkpoint_root: str,
    report_to: list[str] | None = None,
) -> dict:
    """Evaluate, train with an evaluation after every epoch, report. Checkpoints (LoRA
    adapters or weights, optimiser, schedule, RNG) are saved every epoch under
    ``checkpoint_root``; a rerun of a killed run resumes from the latest complete one.
    ``report_to``: the Trainer's loggers (reprolm.train.tracking)."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from reprolm.models.loading import load_tokenizer, visible_gpus
    from reprolm.train.progress import TrainingProgress
    from reprolm.train.stop_on_signal import StopOnSignal

    stop = StopOnSignal()
    torch.manual_seed(seed)
    flags = mixed_precision(recipe.get("precision"), "harmony.train.precision")
    caps = {key: recipe.get(key) for key in ("max_num_train", "max_num_valid", "max_num_test")}
    splits = harmony_splits(spec, caps, seed=recipe.get("split_seed", 0))
    tokenizer = load_tokenizer(model_path)
    tokenizer.padding_side = "right"
    model = place_for_training(model_path, visible_gpus())
    records = training_records(
        splits.task,
        splits.train,
        chat_template=recipe.get("chat_template", False),
        completion_only=recipe.get("completion_only", False),
        tokenizer=tokenizer,
    )
    checkpoint_dir = Path(checkpoint_root) / run_key(model_path, spec, recipe, seed)
    resume = latest_checkpoint(checkpoint_dir)
    progress = EpochProgress(checkpoint_dir)
    progress.resume_at(resume)
    # With W&B among the loggers, the evaluations go through lm-eval's own logger, into the
    # run the Trainer then logs its loss to (one run, named as the Trainer names it).
    logger = wandb_logger({"name": run_name(output, checkpoint_dir.name)}) if "wandb" in (report_to or []) else None
    with tempfile.TemporaryDirectory() as scratch:
        # Models trained on chat-formatted text are asked through the same template.
        evaluate = EpochEvaluator(
            spec,
            splits,
            Path(scratch),
            recipe.get("eval_batch_size", 8),
            seed,
            recipe.get("chat_template", False),
            logger,
        )
        if progress.direct is None:
            progress.direct = evaluate(model, tokenizer)
            progress.save()
        log.info("direct evaluation: %s", progress.direct)

        class EvaluateEachEpoch(TrainerCallback):
            def on_epoch_end(self, args, state, control, model=None, **kwargs):
                if stop.stopped_at is not None:
                    return  # an epoch cut short by a stop signal; it is finished after the resume
                scores = evaluate(model, tokenizer)
                progress.epochs.append({"epoch": round(state.epoch), **scores})
                progress.save()
                log.info("epoch %d: %s", round(state.epoch), scores)

        lora = recipe.get("lora")
        trainer = SFTTrainer(
            model=model,
            processing_class=tokenizer,
            train_dataset=Dataset.from_list(records),
            peft_config=LoraConfig(
                task_type="CAUSAL_LM", r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"]
            )
            if lora
            else None,
            callbacks=[stop, EvaluateEachEpoch(), TrainingProgress()],
            args=SFTConfig(
                output_dir=str(checkpoint_dir),
                num_train_epochs=recipe["num_train_epochs"],
                per_device_train_batch_size=recipe["per_device_train_batch_size"],
                learning_rate=recipe["learning_rate"],
                weight_decay=recipe.get("weight_decay", 0.01),
                max_length=recipe.get("max_length", 1024),
                packing=False,
                completion_only_loss=recipe.get("completion_only", False),
                save_strategy="epoch",
                save_total_limit=1,
                eval_strategy="no",
                logging_strategy="epoch",
                report_to=report_to or [],
                run_name=run_name(output, checkpoint_dir.name),
                disable_tqdm=True,
                seed=seed,
                data_seed=seed,
                **flags,
            ),
        )
        if resume:
            log.info("resuming from %s", resume)
        trainer.train(resume_from_checkpoint=resume)
        stop.raise_if_stopped()
    if logger is not None:
        logger.run.finish()
    direct, epochs = progress.direct, progress.epochs
    best = best_epoch(epochs)
    result = {
        "task": spec.task,
        "metric": spec.metric,
        "sizes": splits.sizes(),
        "direct": direct,
        "epochs": epochs,
        "best_epoch": best["epoch"],
        "train_before_test": best["test"],
        "direct_eval": direct["test"],
    }
    with atomic_path(output) as tmp:
        tmp.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return result
