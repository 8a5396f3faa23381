"""The shared finetune stage: one Trainer-based loop for every recipe, SFT (transformers
Trainer), preference optimisation (TRL's DPOTrainer or KTOTrainer, ``objective: dpo`` or
``kto``) or a reward model
(TRL's RewardTrainer on a sequence-classification head, ``objective: reward``).

Runs in-process, or under torchrun / the deepspeed launcher (see ``launch``) with a
DeepSpeed config: one worker per GPU, or a single worker on CPU for tests. Checkpoints go
to a folder keyed by the run's spec, so a killed run resumes from its latest checkpoint and
a changed recipe never resumes a stale one.
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

from reprolm.io import atomic_path, link_or_copy_tree
from reprolm.oserrors import folder_bytes, naming_os_faults, os_fault
from reprolm.provenance import recorded_hash
from reprolm.stopping import STOPPED_EXIT_STATUS, JobStopped, watch_for_stop
from reprolm.train.examples import build_examples
from reprolm.train.objectives import PREFERENCE_PAIRS, Objective, objective_of
from reprolm.train.precision import mixed_precision
from reprolm.train.tracking import run_name

log = logging.getLogger(__name__)
# The finished model's hard links in the checkpoint folder, and the mark written after them.
FINISHED, FINISHED_MARK = "finished", "finished.key"

TRAINING_KEYS = (
    "learning_rate",
    "num_train_epochs",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "lr_scheduler_type",
    "warmup_ratio",
    "weight_decay",
    "adam_beta2",
    "max_steps",
    "logging_steps",
    "save_steps",
    "gradient_checkpointing",
)
TRAINER_STATE = "trainer_state.json"
# What Trainer.save_model writes the settings it trained with to.
TRAINING_ARGS = "training_args.bin"


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
    precision: str = "float32"  # bfloat16 on GPUs: autocast over float32 weights
    chat_template: str | None = None
    # Where the loss curves go (reprolm.train.tracking); never part of what is trained.
    report_to: list[str] = field(default_factory=list)

    def key(self) -> str:
        """What determines the trained weights; names the checkpoint folder."""
        material = asdict(self)
        for volatile in ("output_dir", "checkpoint_root", "report_to"):
            material.pop(volatile)
        # The starting checkpoint's content, not only its path: a retrained SFT model (the
        # start of a DPO recipe) must never resume checkpoints made from the old one.
        material["base_model_sha256"] = recorded_hash(self.base_model)
        # The DeepSpeed config's content, not its path, shapes the run.
        if self.deepspeed:
            material["deepspeed"] = Path(self.deepspeed).read_text()
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def checkpoint_dir(self) -> Path:
        return Path(self.checkpoint_root) / self.key()

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2, sort_keys=True))

    @classmethod
    def load(cls, path: str | Path) -> FinetuneSpec:
        return cls(**json.loads(Path(path).read_text()))


def _complete(checkpoint: Path) -> bool:
    """Whether a checkpoint was fully written: the Trainer writes trainer_state.json last."""
    try:
        json.loads((checkpoint / TRAINER_STATE).read_text())
    except (OSError, ValueError):
        return False
    return True


def latest_checkpoint(folder: Path) -> str | None:
    """The newest complete checkpoint in ``folder``.

    A run killed while saving (at a SLURM time limit, say: a large model takes minutes to
    save) leaves a newer folder without trainer state. Resuming from it fails (no
    trainer_state.json), and would again on every rerun; the complete checkpoint before it
    is where the run really stopped.
    """
    checkpoints = sorted(
        (p for p in folder.glob("checkpoint-*") if _complete(p)), key=lambda p: int(p.name.split("-")[-1])
    )
    return str(checkpoints[-1]) if checkpoints else None


# Settings the project makes itself, and why; ``recipes.*.trainer_args`` may not set them.
PROJECT_ARGUMENTS = {
    "output_dir": "checkpoints go to results/checkpoints/{base}/{recipe}/<spec hash>",
    "seed": "the config's seed or recipes.*.seeds sets it",
    "data_seed": "the config's seed or recipes.*.seeds sets it",
    "deepspeed": "recipes.*.deepspeed sets it",
    "bf16": "base_models.*.resources.finetune.precision sets it",
    "fp16": "base_models.*.resources.finetune.precision sets it",
    "use_cpu": "base_models.*.resources.finetune.precision sets it",
    "report_to": "tracking.report_to sets it",
    "run_name": "the tracked run is named after the model's path and training key",
    "save_strategy": "recipes.*.save_steps sets it (every epoch without it)",
    "remove_unused_columns": "the project's collators read the train file's own columns",
    "resume_from_checkpoint": "a killed finetune resumes from its latest checkpoint by itself",
    "push_to_hub": "finetunes run with the hubs offline; models go to results/models",
}
# Recipe keys that are also settings of the class: set once, at the recipe's top level.
RECIPE_ARGUMENTS = (*TRAINING_KEYS, "beta", "max_length")
# ``recipes.*.peft`` keys of our own; the others are peft's LoraConfig's.
PEFT_OWN_KEYS = ("quantization", "save")
# LoraConfig settings the project makes itself, and why.
PROJECT_PEFT_KEYS = {
    "task_type": "the recipe's objective sets it (a causal LM, or sequence classification for reward)",
    "base_model_name_or_path": "the finetune's starting model sets it",
    "inference_mode": "a finetune trains the adapter",
    "peft_type": "recipes.*.peft is LoRA",
}


def training_arguments(spec: FinetuneSpec):
    """Trainer settings from the recipe: its objective's settings class (``TrainingArguments``
    for SFT, TRL's ``DPOConfig``, ``KTOConfig`` or ``RewardConfig``) with the objective's own
    settings (``beta``, ``max_length``, ...), ``trainer_args`` on top of the defaults, under
    the settings the project owns (``PROJECT_ARGUMENTS``)."""
    recipe = spec.recipe
    objective = objective_of(recipe)
    settings = {k: recipe[k] for k in TRAINING_KEYS if k in recipe}
    # transformers 5 takes a warm-up ratio as a float warmup_steps below 1.
    if "warmup_ratio" in settings:
        settings["warmup_steps"] = float(settings.pop("warmup_ratio"))
    save_steps = settings.pop("save_steps", None)
    defaults = {
        "logging_steps": 10,
        "save_steps": save_steps or 500,
        "save_total_limit": 2,
        # Info on the main process puts DeepSpeed's engine set-up (ZeRO stage, partitioning)
        # in the run's log; replicas stay quiet.
        "log_level": "info",
        "log_level_replica": "warning",
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
    }
    owned = {
        **_loss_normalisation(recipe),
        "output_dir": str(spec.checkpoint_dir),
        "seed": spec.seed,
        "data_seed": spec.seed,
        **mixed_precision(spec.precision, f"precision of the finetune of {spec.base_model}"),
        "deepspeed": spec.deepspeed,
        "save_strategy": "steps" if save_steps else "epoch",
        "report_to": spec.report_to,
        "run_name": run_name(spec.output_dir, spec.key()),
        "remove_unused_columns": False,
    }
    return objective.arguments_class()(
        **{**defaults, **objective.settings(recipe), **settings, **recipe.get("trainer_args", {}), **owned}
    )


def _loss_normalisation(recipe: dict) -> dict:
    """``average_tokens_across_devices`` off for a loss normalised per micro-batch (``loss:
    {compat: original}``), refusing a ``trainer_args`` that turns it on."""
    from reprolm.train.losses import per_micro_batch

    if not per_micro_batch(recipe):
        return {}
    if recipe.get("trainer_args", {}).get("average_tokens_across_devices"):
        raise ValueError(
            "recipes.*.trainer_args.average_tokens_across_devices: a loss with compat 'original' "
            "is normalised per micro-batch and per device; leave it out"
        )
    return {"average_tokens_across_devices": False}


def lora_config(recipe: dict, add_token_ids: list[int]):
    """peft's LoraConfig from ``recipes.*.peft`` (less the project's own keys), for a causal LM
    or, for a reward recipe, a sequence classifier (whose new head peft trains in full). Added
    tokens' embeddings are trained too, else they would stay random."""
    from peft import LoraConfig, TaskType

    settings = {k: v for k, v in recipe["peft"].items() if k not in PEFT_OWN_KEYS}
    if add_token_ids:
        settings.setdefault("trainable_token_indices", {"embed_tokens": add_token_ids})
    task = TaskType.SEQ_CLS if objective_of(recipe).scores_sequences else TaskType.CAUSAL_LM
    return LoraConfig(task_type=task, **settings)


def quantized(recipe: dict) -> bool:
    return recipe.get("peft", {}).get("quantization") == "4bit"


def load_start_model(spec: FinetuneSpec, tokenizer, quantize: bool):
    """The model a finetune starts from, in float32 (a reward recipe's with a one-output head
    that reads the score at the last non-pad token); QLoRA's in 4-bit NF4 on this worker's GPU.
    A LoRA adapter folder (an ``init`` recipe saved as one) arrives merged into its base."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    from reprolm.models.loading import from_pretrained

    kwargs = {"dtype": torch.float32}
    model_class = AutoModelForCausalLM
    if objective_of(spec.recipe).scores_sequences:
        model_class = AutoModelForSequenceClassification
        kwargs.update(num_labels=1, pad_token_id=tokenizer.pad_token_id)
    if quantize:
        kwargs.update(quantization_config=qlora_quantization(spec), device_map={"": torch.cuda.current_device()})
    model = from_pretrained(model_class, spec.base_model, **kwargs)
    if spec.add_tokens:
        model.resize_token_embeddings(len(tokenizer))
    if quantize:
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model)
    return model.train()


def qlora_quantization(spec: FinetuneSpec):
    """QLoRA's 4-bit NF4 weights with double quantization, computing in bfloat16; refused
    where bitsandbytes or a GPU is missing (its kernels are CUDA's)."""
    import importlib.util

    import torch
    from transformers import BitsAndBytesConfig

    if importlib.util.find_spec("bitsandbytes") is None or not torch.cuda.is_available():
        raise RuntimeError(
            f"peft.quantization 4bit of the finetune of {spec.base_model}: QLoRA needs bitsandbytes and a CUDA GPU "
            f"(bitsandbytes installed: {importlib.util.find_spec('bitsandbytes') is not None}, "
            f"GPUs: {torch.cuda.device_count()}); leave quantization out to train LoRA in full precision"
        )
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )


def save_merged(spec: FinetuneSpec, tokenizer, adapter_dir: Path) -> Path:
    """The full-precision start model with the trained adapter merged in, saved next to
    ``adapter_dir``: a plain checkpoint, usable as a base, an ExPO end or a judge. Merged
    into float32 weights loaded anew, not into the training copy, which QLoRA keeps in 4 bits
    and ZeRO-3 partitions."""
    from peft import PeftModel

    merged_dir = adapter_dir.with_name("merged")
    shutil.rmtree(merged_dir, ignore_errors=True)
    model = PeftModel.from_pretrained(load_start_model(spec, tokenizer, quantize=False), adapter_dir)
    model = model.merge_and_unload()
    model.save_pretrained(merged_dir)
    tokenizer.save_pretrained(merged_dir)
    # The trainer's settings stay with the model they made.
    shutil.copy2(adapter_dir / TRAINING_ARGS, merged_dir)
    shutil.rmtree(adapter_dir)
    return merged_dir


PREFERENCE_FIELDS = ("prompt", "chosen", "rejected")


def preference_trainer(
    model, tokenizer, args, records: list[dict], source: str, objective: Objective, peft_config=None
):
    """The objective's TRL trainer on conversational pairs (``prompt`` turns,
    ``chosen``/``rejected`` assistant turns): DPOTrainer (the reference model is a frozen copy
    of the starting model, or with ``peft_config`` the model with its adapter off),
    KTOTrainer (each pair becomes a desirable and an undesirable example) or RewardTrainer
    (Bradley-Terry loss on the pair's two scores)."""
    from datasets import Dataset
    from trl.data_utils import unpair_preference_dataset

    for row, record in enumerate(records):
        for field_name in PREFERENCE_FIELDS:
            if not record.get(field_name):
                raise KeyError(
                    f"{source}: row {row}: missing or empty field {field_name!r} (a {objective.name} recipe "
                    f"needs {list(PREFERENCE_FIELDS)}, e.g. from the preference_pairs builder)"
                )
    pairs = Dataset.from_list([{name: record[name] for name in PREFERENCE_FIELDS} for record in records])
    log.info("%d preference pairs", len(pairs))
    return objective.trainer_class()(
        model=model,
        args=args,
        train_dataset=unpair_preference_dataset(pairs) if objective.unpaired else pairs,
        processing_class=tokenizer,
        peft_config=peft_config,
    )


def without_cpu_shared_memory_allreduce() -> None:
    """On DeepSpeed's CPU accelerator, leave collectives to gloo rather than DeepSpeed's
    shared-memory allreduce kernel. reprolm runs one CPU worker only (``launch`` refuses
    more), which has no peer to reduce with, yet DeepSpeed JIT-compiles that kernel before the
    first step, on every new install (about a minute of gcc). Marked unbuildable, as on
    platforms without the kernel, it is never built; GPU accelerators do not use it."""
    from deepspeed.accelerator import get_accelerator

    if get_accelerator().device_name() != "cpu":
        return
    import deepspeed.ops
    from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder

    deepspeed.ops.__compatible_ops__[ShareMemCommBuilder.NAME] = False


def run(spec: FinetuneSpec) -> None:
    if restore_finished(spec):
        return
    import pyarrow.parquet as pq
    import torch
    from datasets import Dataset
    from transformers import DataCollatorForSeq2Seq

    from reprolm.models.loading import load_tokenizer
    from reprolm.train.losses import trainer_loss
    from reprolm.train.progress import TrainingProgress
    from reprolm.train.stop_on_signal import SAVE_MINUTES, SaveEveryMinutes, StopOnSignal

    torch.manual_seed(spec.seed)
    if spec.deepspeed:
        without_cpu_shared_memory_allreduce()
    # Arguments before the model: with a ZeRO-3 config they register it globally, so
    # from_pretrained partitions the weights across ranks while loading instead of every
    # rank holding the whole model. Loaded without load_causal_lm, which also moves the
    # model to a device: placement is the Trainer's or DeepSpeed's job here.
    args = training_arguments(spec)
    if spec.deepspeed:
        from deepspeed.utils import logger as ds_logger

        # DeepSpeed's handler filters at WARNING whatever its logger's level, which would
        # keep the engine set-up out of the log; follow the Trainer's per-rank level.
        for handler in ds_logger.handlers:
            handler.setLevel(args.get_process_log_level())
        ds_logger.setLevel(args.get_process_log_level())
    tokenizer = load_tokenizer(spec.base_model, spec.chat_template)
    if spec.add_tokens:
        tokenizer.add_tokens(spec.add_tokens, special_tokens=True)
    model = load_start_model(spec, tokenizer, quantize=quantized(spec.recipe))
    peft_config = None
    if "peft" in spec.recipe:
        peft_config = lora_config(spec.recipe, tokenizer.convert_tokens_to_ids(spec.add_tokens))

    records = pq.read_table(spec.train_file).to_pylist()
    objective = objective_of(spec.recipe)
    log.info("objective %s: %s", objective.name, objective.loss)
    if objective.reads == PREFERENCE_PAIRS:
        trainer = preference_trainer(model, tokenizer, args, records, spec.train_file, objective, peft_config)
    else:
        if peft_config is not None:
            from peft import get_peft_model

            model = get_peft_model(model, peft_config)
            if args.gradient_checkpointing:
                # Checkpointed layers recompute from their inputs, which must carry gradients
                # although the frozen embeddings' outputs would not.
                model.enable_input_require_grads()
        examples = build_examples(tokenizer, records, spec.recipe, spec.train_file)
        trainable = [e for e in examples if any(label != -100 for label in e["labels"])]
        log.info("%d training examples (%d fully masked by truncation)", len(trainable), len(examples) - len(trainable))
        trainer = objective.trainer_class()(
            model=model,
            args=args,
            train_dataset=Dataset.from_list(trainable),
            data_collator=DataCollatorForSeq2Seq(tokenizer, label_pad_token_id=-100, padding=True),
            processing_class=tokenizer,
            compute_loss_func=trainer_loss(spec.recipe),
        )
    stop = StopOnSignal()
    trainer.add_callback(stop)
    trainer.add_callback(SaveEveryMinutes(spec.recipe.get("save_minutes", SAVE_MINUTES)))
    trainer.add_callback(TrainingProgress())
    resume = latest_checkpoint(spec.checkpoint_dir)
    if resume:
        log.info("resuming from %s", resume)
    # The trainer's model: with peft_config, TRL wraps the adapter around it.
    with naming_os_faults(spec.checkpoint_dir, "a checkpoint", checkpoint_bytes(trainer.model)):
        trainer.train(resume_from_checkpoint=resume)
    stop.raise_if_stopped()

    # Under ZeRO-3 gathering the full weights is a collective, so every rank calls
    # save_model; only the world's rank 0 writes (weights, config, tokenizer). The folder
    # name must agree across ranks, hence a fixed one inside the checkpoint folder that
    # rank 0 then moves into place.
    staging = spec.checkpoint_dir / "final"
    if trainer.is_world_process_zero():
        shutil.rmtree(staging, ignore_errors=True)
    with naming_os_faults(staging, "the model", model_bytes(model)):
        trainer.save_model(str(staging))
    if trainer.is_world_process_zero():
        if "peft" in spec.recipe and spec.recipe["peft"].get("save", "merged") == "merged":
            staging = save_merged(spec, tokenizer, staging)
        # A move across file systems (checkpoints on scratch, models elsewhere) is a copy.
        with naming_os_faults(spec.output_dir, "the model", folder_bytes(staging)):
            with atomic_path(spec.output_dir) as tmp:
                shutil.move(staging, tmp)
        keep_finished(spec)


def model_bytes(model) -> int:
    """The saved weights' size: parameter count x dtype size (``ds_numel``: the whole count of
    a parameter ZeRO-3 partitions across ranks)."""
    return sum(getattr(p, "ds_numel", p.numel()) * p.element_size() for p in model.parameters())


def checkpoint_bytes(model) -> int:
    """A Trainer checkpoint's size, roughly: the weights and Adam's two float32 moments per
    trainable parameter."""
    trainable = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters() if p.requires_grad)
    return model_bytes(model) + 2 * 4 * trainable


def keep_finished(spec: FinetuneSpec) -> None:
    """Replace the run's checkpoints with hard links to the finished model.

    A job that finishes in the seconds before its time limit can still be killed while it
    exits; SLURM then reports a timeout and Snakemake deletes the model and retries. The
    retry finds the links (``restore_finished``) instead of training again. They cost no
    disk while the model exists, and the next finetune of the same base and recipe, under
    any settings, clears them. Where checkpoints and models are on different file systems
    the links are copies; where even a copy does not fit, the checkpoints stay instead (a
    retry resumes from the last one) and the log says so.
    """
    finished = spec.checkpoint_dir / FINISHED
    shutil.rmtree(finished, ignore_errors=True)
    try:
        link_or_copy_tree(spec.output_dir, finished)
    except OSError as error:
        shutil.rmtree(finished, ignore_errors=True)
        fault = os_fault(error, [finished], "a copy of the finished model", folder_bytes(spec.output_dir))
        if fault is None:
            raise
        log.warning("%s; the checkpoints in %s stay for a retry instead", fault, spec.checkpoint_dir)
        return
    # Written last: links without it are an interrupted copy, never restored.
    (spec.checkpoint_dir / FINISHED_MARK).write_text(spec.key() + "\n")
    for entry in spec.checkpoint_dir.iterdir():
        if entry.is_dir() and entry.name != FINISHED:
            shutil.rmtree(entry)
        elif entry.is_file() and entry.name != FINISHED_MARK:
            entry.unlink()


def restore_finished(spec: FinetuneSpec) -> bool:
    """Put back the model an earlier attempt of this very spec finished (``keep_finished``);
    otherwise clear what other settings left under the same base and recipe."""
    root = Path(spec.checkpoint_root)
    if root.is_dir():
        for stale in root.iterdir():
            if stale.name != spec.key() and (stale / FINISHED_MARK).exists():
                shutil.rmtree(stale, ignore_errors=True)
    if not (spec.checkpoint_dir / FINISHED_MARK).exists():
        return False
    if int(os.environ.get("RANK", "0")) == 0:
        with atomic_path(spec.output_dir) as tmp:
            link_or_copy_tree(spec.checkpoint_dir / FINISHED, tmp)
    log.info("kept the model an earlier attempt finished (%s)", spec.checkpoint_dir / FINISHED)
    return True


def main(argv: list[str] | None = None) -> None:
    """Entry point for launchers: ``python -m reprolm.train.finetune SPEC.json``."""
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    spec = FinetuneSpec.load(argv[0])
    watch_for_stop()
    try:
        run(spec)
    except JobStopped as stop:
        # The launcher's parent reads why this worker stopped (torchrun reports only a failure).
        if int(os.environ.get("RANK", "0")) == 0:
            stop_note_path(spec).write_text(json.dumps({"signal": stop.signal_name, "progress": stop.progress}))
        log.warning("%s", stop)
        sys.exit(STOPPED_EXIT_STATUS)


def stop_note_path(spec: FinetuneSpec) -> Path:
    """Where a launched worker that stopped on a signal says so, for the launcher's parent."""
    return spec.checkpoint_dir / "stopped.json"


if __name__ == "__main__":
    main()
