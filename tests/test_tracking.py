"""Optional experiment tracking: off by default, TensorBoard's loss curve where asked for,
and never part of what a training run is (its checkpoint key, hence its reruns)."""

from __future__ import annotations

import os

import pytest

from finetune_helpers import MLT_TOKENS, tiny_finetune_inputs
from reprolm.train.tracking import report_to


def test_tracking_is_off_by_default_and_refuses_an_unknown_logger():
    assert report_to({}, "finetune/x/y") == [] and report_to({"report_to": "none"}, "finetune/x/y") == []
    with pytest.raises(
        ValueError, match=r"^tracking.report_to: 'comet'; choose from \['none', 'tensorboard', 'wandb', 'mlflow'\]"
    ):
        report_to({"report_to": "comet"}, "finetune/x/y")


@pytest.mark.slow
def test_a_tracked_finetune_writes_its_loss_curve_to_tensorboard(tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from reprolm.train.finetune import FinetuneSpec, run

    tiny_finetune_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    # Set here so that the test's end removes what report_to sets.
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", "")
    loggers = report_to({"report_to": "tensorboard"}, "finetune/tiny/sft")
    assert loggers == ["tensorboard"]
    assert os.environ["TENSORBOARD_LOGGING_DIR"] == str(tmp_path / "logs/tensorboard/finetune/tiny/sft")
    recipe = {
        "format": "instruction_response",
        "completion_prefix": "mlt",
        "max_length": 128,
        "learning_rate": 1e-3,
        "max_steps": 3,
        "per_device_train_batch_size": 4,
        "logging_steps": 1,
    }
    spec = FinetuneSpec(
        base_model=str(tmp_path / "base"),
        output_dir=str(tmp_path / "out"),
        checkpoint_root=str(tmp_path / "checkpoints"),
        train_file=str(tmp_path / "train.parquet"),
        recipe=recipe,
        seed=0,
        add_tokens=list(MLT_TOKENS),
        report_to=loggers,
    )
    untracked = FinetuneSpec(**{**spec.__dict__, "report_to": []})
    assert spec.key() == untracked.key()
    run(spec)
    events = EventAccumulator(str(tmp_path / "logs/tensorboard/finetune/tiny/sft"))
    events.Reload()
    losses = events.Scalars("train/loss")
    assert [event.step for event in losses] == [1, 2, 3]


class WandbStandIn:
    """A recording stand-in for the ``wandb`` package (not installed here; its runs need an
    account or an offline folder): what lm-eval's own WandbLogger calls, recorded."""

    __version__ = "0.19.0"

    class Table:
        def __init__(self, columns=None, dataframe=None, **kwargs):
            self.columns, self.rows = list(columns or (dataframe.columns if dataframe is not None else [])), []

        def add_data(self, *row):
            self.rows.append(row)

    class Artifact:
        def __init__(self, name, type):
            self.name, self.type, self.files = name, type, {}

        def new_file(self, name, mode="w", encoding=None):
            import io

            artifact = self

            class Recorded(io.StringIO):
                def __exit__(self, *exc):
                    artifact.files[name] = self.getvalue()
                    return super().__exit__(*exc)

            return Recorded()

    class Run:
        def __init__(self, init_args):
            self.init_args, self.logged, self.artifacts, self.finished = init_args, [], [], False
            self.config, self.summary = {}, {}
            self.config = type("Config", (dict,), {"update": lambda c, d, **k: dict.update(c, d)})()
            self.summary = type("Summary", (dict,), {"update": lambda c, d, **k: dict.update(c, d)})()

        def log(self, values, step=None):
            self.logged.append(values)

        def log_artifact(self, artifact):
            self.artifacts.append(artifact)

        def finish(self):
            self.finished = True

    def __init__(self):
        self.run, self.runs = None, []

    def init(self, **init_args):
        self.run = self.Run(init_args)
        self.runs.append(self.run)
        return self.run


@pytest.fixture
def wandb_stand_in(monkeypatch):
    """The stand-in installed as the ``wandb`` package that lm-eval's WandbLogger imports."""
    import importlib.machinery
    import sys
    import types

    stand_in = WandbStandIn()
    module = types.ModuleType("wandb")
    module.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
    for name in ("__version__", "Table", "Artifact", "init"):
        setattr(module, name, getattr(stand_in, name))
    module.__getattr__ = lambda name: getattr(stand_in, name)
    printer = types.ModuleType("wandb.sdk.lib.printer")
    printer.new_printer = lambda: None
    for name, value in {
        "wandb": module,
        "wandb.sdk": types.ModuleType("wandb.sdk"),
        "wandb.sdk.lib": types.ModuleType("wandb.sdk.lib"),
        "wandb.sdk.lib.printer": printer,
    }.items():
        monkeypatch.setitem(sys.modules, name, value)
    return stand_in


def test_lm_eval_results_go_through_lm_evals_own_wandb_logger_to_a_run_named_after_the_score(
    tmp_path, monkeypatch, wandb_stand_in
):
    """tracking.report_to: wandb hands the lm_eval rule's results, with its samples, to
    lm-eval's WandbLogger (the real class), in a run named after the score file and the
    evaluation's key (model content, suite, data, backend, precision, seed)."""
    from reprolm.data.task_docs import write_task_docs
    from reprolm.data.upstream import make_fixture
    from reprolm.score.suites import run_suite, suite_key
    from reprolm.train.tracking import run_name

    stand_in = wandb_stand_in
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    tiny_finetune_inputs(tmp_path)
    write_task_docs(make_fixture("boolq", n=4, seed=0), tmp_path / "boolq")
    suite = {
        "tasks": [
            {"name": "boolq", "task": "boolq", "num_fewshot": 0, "metric": "acc,none", "source": "boolq", "limit": 3}
        ]
    }
    sources = {"boolq": str(tmp_path / "boolq")}
    score = "results/scores/lm_eval/tiny/pretrained/mini.json"
    result = run_suite(
        "base",
        suite,
        sources,
        backend="transformers",
        precision="float32",
        seed=0,
        samples_output=str(tmp_path / "samples.jsonl.gz"),
        tracking={"report_to": "wandb", "project": "study"},
        artifact=score,
    )
    [run] = stand_in.runs
    key = suite_key("base", suite, sources, "hf", "float32", 0)
    assert run.init_args["name"] == run_name(score, key) == f"{score}@{key}"
    assert run.init_args["project"] == "study" and run.init_args["job_type"] == "lm_eval"
    assert run.finished
    # lm-eval's own logging: the metrics by task/metric, its results table and artifact,
    # and the per-sample table of the 3 documents.
    metrics = run.logged[0]
    assert metrics["boolq/acc"] == pytest.approx(result["tasks"]["boolq"]["value"])
    tables = {key: value for entry in run.logged[1:] for key, value in entry.items()}
    assert "evaluation/eval_results" in tables and len(tables["boolq_eval_results"]) == 3
    assert [artifact.type for artifact in run.artifacts] == ["eval_results", "samples_by_task"]
    assert run.config["task_configs"]["boolq"]["task"] == "boolq"


def test_train_before_test_evaluations_are_labelled_by_their_set_in_one_run(wandb_stand_in):
    """The valid and test evaluations of one task share the Trainer's run: lm-eval's logger
    gets each under its set's label."""
    from reprolm.score.lm_eval_bridge import log_evaluation, wandb_logger

    logger = wandb_logger({"name": "results/scores/harmony/x.json@0123"})
    for label, value in (("valid", 0.5), ("test", 0.75)):
        output = {
            "results": {"boolq": {"alias": "boolq", "acc,none": value, "acc_stderr,none": 0.1}},
            "configs": {"boolq": {"task": "boolq", "output_type": "multiple_choice"}},
            "versions": {"boolq": 2.0},
            "n-shot": {"boolq": 0},
            "higher_is_better": {"boolq": {"acc": True}},
        }
        log_evaluation(logger, output, label)
    [run] = wandb_stand_in.runs
    assert run.init_args == {"name": "results/scores/harmony/x.json@0123"}
    metrics = [entry for entry in run.logged if any(key.endswith("/acc") for key in entry)]
    assert metrics == [
        {"boolq-valid/acc": 0.5, "boolq-valid/acc_stderr": 0.1},
        {"boolq-test/acc": 0.75, "boolq-test/acc_stderr": 0.1},
    ]
