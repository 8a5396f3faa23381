"""GEM's tables in the seed's layout, one row per recipe (CE, GEM-Linear, GEM-Logsigmoid)
of each base model: IFEval, GSM8K (greedy, majority voting and best-of-N at the largest k,
and every k), chat best-of-n reward (at the seed's n), and diversity per creative-writing
prompt set; plus plots of maj@k / pass@k against k and of the diversity scores.

A metric scored by more than one definition (its ``compat`` and ``variants``, e.g. the
original code's and the paper's) fills the seed's columns by its ``compat``, named in the
row's ``definition`` column, and the same columns again, marked ``[variant]``, by each
variant."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from reprolm.aggregate.judged import pair_accuracy_estimate, source_of
from reprolm.aggregate.lm_eval_estimates import lm_eval_estimates
from reprolm.aggregate.tables import Score
from reprolm.aggregate.uncertainty import mean_of, mean_of_estimates
from reprolm.io import atomic_path, split_estimates, write_table
from reprolm.score.sampling import best_and_mean_per_prompt

# lm-eval's IFEval metrics under the seed's column names ("-Level" columns are the loose ones).
IFEVAL_COLUMNS = {
    "Prompt-Strict": "prompt_level_strict_acc,none",
    "Instruction-Strict": "inst_level_strict_acc,none",
    "Prompt-Level": "prompt_level_loose_acc,none",
    "Instruction-Level": "inst_level_loose_acc,none",
}
DIVERSITY_COLUMNS = {
    "N-gram Distinct Ratio": "distinct",
    "Self-BLEU Diversity Score": "self_bleu",
    "Sentence-Embedding Diversity Score": "embedding",
}


def _row(study: Mapping, base: str, recipe: str) -> dict:
    return {"base": base, "model": study.get("labels", {}).get(recipe, recipe)}


def _find(scores: list[Score], metric: str, base: str, recipe: str, name: str) -> Score | None:
    return next((s for s in scores if (s.metric, s.base, s.recipe, s.name) == (metric, base, recipe, name)), None)


def _definitions(data: Mapping) -> list[tuple[str, Mapping]]:
    """A score's definitions, each with its column suffix: its ``compat`` (the seed's columns
    as they are, no suffix) and then each of its ``variants`` (`` [name]``)."""
    return [("", data)] + [(f" [{name}]", variant) for name, variant in data.get("variants", {}).items()]


def generation_protocol(kwargs: Mapping | None) -> str:
    """How an lm-eval generation task answered, from its generation kwargs: greedy, or
    sampled at its temperature, top-p and top-k; and its token budget."""
    if kwargs is None:
        return "not recorded"
    budget = f"{kwargs['max_gen_toks']} tokens" if "max_gen_toks" in kwargs else "the task's token budget"
    if not kwargs.get("do_sample"):
        return f"greedy, {budget}"
    knobs = [
        f"{name} {kwargs[key]}"
        for name, key in (("T", "temperature"), ("top-p", "top_p"), ("top-k", "top_k"))
        if key in kwargs
    ]
    return f"sampled ({', '.join(knobs)}), one sample, {budget}"


def ifeval_table(scores: list[Score], study: Mapping, models: list) -> pd.DataFrame:
    """Per model: the four IFEval accuracies x 100 and their mean, each with its bootstrap
    over prompts (documents); how many prompts were scored, and which instructions could not
    be checked here and why. The suite's first IFEval task fills the columns, its protocol
    (greedy or sampled) named in ``protocol``; each further IFEval task (another protocol)
    fills the same columns again, marked ``[task name]``."""
    rows = []
    for base, recipe in models:
        score = _find(scores, "lm_eval", base, recipe, study["lm_eval_suite"])
        tasks = score.data["tasks"] if score else {}
        # The suite's order (the score file's keys are sorted).
        ifeval = (
            [(spec, tasks[spec]) for spec in score.data.get("task_order", tasks) if tasks[spec]["task"] == "ifeval"]
            if score
            else []
        )
        if not ifeval:
            continue
        row = _row(study, base, recipe)
        for index, (spec, summary) in enumerate(ifeval):
            mark = "" if index == 0 else f" [{spec}]"
            estimates = lm_eval_estimates(score, {spec: list(IFEVAL_COLUMNS.values())})[spec]
            figures = {f"{column}{mark}": estimates[key].scaled(100) for column, key in IFEVAL_COLUMNS.items()}
            row.update(figures)
            row[f"Avg{mark}"] = mean_of_estimates(list(figures.values()))
            row[f"protocol{mark}"] = generation_protocol(summary.get("generation_kwargs"))
            row[f"prompts scored{mark}"] = summary["n_docs"]
            unscored = summary.get("unscored")
            row[f"not scored{mark}"] = (
                ""
                if not unscored
                else (
                    f"{unscored.get('docs', 'some')} prompts with "
                    + "; ".join(f"{instruction}: {why}" for instruction, why in unscored["instructions"].items())
                )
            )
        rows.append(row)
    return pd.DataFrame(rows)


def _evaluation_promptsets(study: Mapping, metric: str) -> list[str]:
    return [e["promptset"] for e in study.get("evaluations", []) if e["metric"] == metric]


def gsm8k_tables(scores: list[Score], study: Mapping, models: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The seed's table (greedy accuracy, majority voting and best-of-N, i.e. pass@k, at the
    largest k) and the long table of maj@k and pass@k at every k; each with its bootstrap over
    prompts."""
    headline, by_k = [], []
    greedy_sets = _evaluation_promptsets(study, "answer_accuracy")
    voting_sets = _evaluation_promptsets(study, "answer_voting")
    for base, recipe in models:
        row = _row(study, base, recipe)
        definition = None
        for promptset in greedy_sets:
            greedy = _find(scores, "answer_accuracy", base, recipe, promptset)
            for suffix, data in _definitions(greedy.data) if greedy else []:
                row[f"Greedy Decoding{suffix}"] = mean_of(data["correct"], data["ids"], scale=100.0)
            definition = greedy.data.get("compat", "paper") if greedy else definition
        for promptset in voting_sets:
            voting = _find(scores, "answer_voting", base, recipe, promptset)
            if not voting:
                continue
            for suffix, data in _definitions(voting.data):
                maj = [mean_of(correct, data["ids"], scale=100.0) for correct in data["maj_correct"]]
                passed = [mean_of(correct, data["ids"], scale=100.0) for correct in data["pass_correct"]]
                k = data["ks"][-1]
                row[f"Majority Voting (@{k}){suffix}"] = maj[-1]
                row[f"Best-of-N (@{k}){suffix}"] = passed[-1]
                by_k += [
                    {
                        **_row(study, base, recipe),
                        "definition": data.get("compat", "paper"),
                        "k": k_,
                        "maj@k": maj_k,
                        "pass@k": pass_k,
                    }
                    for k_, maj_k, pass_k in zip(data["ks"], maj, passed, strict=True)
                ]
            definition = voting.data.get("compat", "paper")
        if len(row) > 2:
            headline.append({**row, "definition": definition})
    return pd.DataFrame(headline), pd.DataFrame(by_k)


def chat_tables(scores: list[Score], study: Mapping, models: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Reward of the best of n samples per prompt at each ``headline`` n (the seed reports
    n = 8; default the largest n), and the best-of-n and mean-of-n reward at every n; each
    with its bootstrap over prompts. The judges graded ``beside`` the headline one add their
    own columns (marked ``[judge]``) and rows."""
    spec = study["best_of_n"]
    ns = spec["ns"]
    headline, by_n = [], []
    for base, recipe in models:
        row = _row(study, base, recipe)
        for judge in [spec["judge"], *spec.get("beside", [])]:
            graded = _find(scores, f"grade_{judge}", base, recipe, spec["promptset"])
            if graded is None:
                continue
            rewards: dict = {}
            for prompt_id, _sample, grades in sorted(
                zip(graded.data["ids"], graded.data["samples"], graded.data["grades"], strict=True)
            ):
                rewards.setdefault(prompt_id, []).append(grades[-1])
            prompts = list(rewards)
            result = {
                n: {
                    name: mean_of(values, prompts)
                    for name, values in best_and_mean_per_prompt(list(rewards.values()), n).items()
                }
                for n in ns
            }
            mark = "" if judge == spec["judge"] else f" [{judge}]"
            row.update({f"Reward (Best-of-N @{n}){mark}": result[n]["best"] for n in spec.get("headline", ns[-1:])})
            by_n += [
                {
                    **_row(study, base, recipe),
                    "judge": judge,
                    "n": n,
                    "best-of-n": result[n]["best"],
                    "mean-of-n": result[n]["mean"],
                }
                for n in ns
            ]
        if len(row) > len(_row(study, base, recipe)):
            headline.append(row)
    return pd.DataFrame(headline), pd.DataFrame(by_n)


def diversity_table(scores: list[Score], study: Mapping, models: list, promptset: str) -> pd.DataFrame:
    """Per model: each diversity score's mean over prompts (the n-gram distinct ratio is the
    mean of distinct-1, 2 and 3), with its bootstrap over prompts, by each definition the
    score holds."""
    rows = []
    for base, recipe in models:
        score = _find(scores, "diversity", base, recipe, promptset)
        if score is None:
            continue
        row = _row(study, base, recipe)
        for suffix, data in _definitions(score.data):
            figures = {name: mean_of(values, score.data["ids"]) for name, values in data["per_prompt"].items()}
            figures["distinct"] = mean_of_estimates([figures[f"distinct_{n}"] for n in (1, 2, 3)])
            row.update({f"{column}{suffix}": figures[key] for column, key in DIVERSITY_COLUMNS.items()})
            row.update({f"distinct-{n}{suffix}": figures[f"distinct_{n}"] for n in (1, 2, 3)})
        rows.append({**row, "definition": score.data["compat"], "encoder": score.data["encoder"]})
    return pd.DataFrame(rows)


def judge_table(scores: list[Score], study: Mapping) -> pd.DataFrame:
    """The best-of-n reward model's accuracy on held-out preference pairs."""
    rows = [
        {
            "judge": s.data["judge"],
            "dataset": s.data["dataset"],
            "pairs": s.data["n"],
            "accuracy": pair_accuracy_estimate(s.data, source_of(s)),
        }
        for s in scores
        if s.metric == "pair_accuracy"
    ]
    return pd.DataFrame(rows)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(figure, path: Path) -> None:
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120)
    _pyplot().close(figure)


def _bounds(rows: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """The interval columns ``write_table`` gives an estimate column, as float arrays."""
    return (
        rows[f"{column} lo"].to_numpy(dtype=float, na_value=np.nan),
        rows[f"{column} hi"].to_numpy(dtype=float, na_value=np.nan),
    )


def plot_scaling(by_k: pd.DataFrame, path: Path) -> None:
    """maj@k and pass@k against k per model, each with its interval as a shaded band."""
    plt = _pyplot()
    by_k, _ = split_estimates(by_k)
    bases = list(dict.fromkeys(by_k["base"]))
    figure, axes = plt.subplots(1, len(bases), figsize=(5 * len(bases), 3.6), squeeze=False)
    for axis, base in zip(axes[0], bases, strict=True):
        for index, (model, rows) in enumerate(by_k[by_k["base"] == base].groupby("model", sort=False)):
            colour = f"C{index}"
            for column, marker, linestyle in (("maj@k", "o", "-"), ("pass@k", "s", "--")):
                axis.plot(
                    rows["k"], rows[column], marker=marker, linestyle=linestyle, color=colour, label=f"{model} {column}"
                )
                axis.fill_between(rows["k"], *_bounds(rows, column), color=colour, alpha=0.15, linewidth=0)
        axis.set_xscale("log", base=2)
        axis.set_xlabel("k (samples)")
        axis.set_ylabel("GSM8K accuracy (%)")
        axis.set_title(base)
        axis.legend(fontsize=7)
    _save(figure, path)


def plot_diversity(tables: dict[str, pd.DataFrame], path: Path) -> None:
    """The diversity scores per model and prompt set, with error bars from their intervals."""
    plt = _pyplot()
    figure, axes = plt.subplots(1, len(tables), figsize=(5 * len(tables), 3.6), squeeze=False)
    for axis, (promptset, frame) in zip(axes[0], tables.items(), strict=True):
        frame, _ = split_estimates(frame)
        labels = [f"{row.base}\n{row.model}" for row in frame.itertuples()]
        width = 0.8 / len(DIVERSITY_COLUMNS)
        for index, column in enumerate(DIVERSITY_COLUMNS):
            value = frame[column].to_numpy(dtype=float)
            low, high = _bounds(frame, column)
            axis.bar(
                [i + index * width for i in range(len(frame))],
                value,
                width=width,
                label=column,
                yerr=np.nan_to_num(np.stack([value - low, high - value])),
                capsize=2,
            )
        axis.set_xticks([i + width for i in range(len(frame))], labels, fontsize=7)
        axis.set_ylabel("diversity (x 100)")
        axis.set_title(promptset)
        axis.legend(fontsize=7)
    _save(figure, path)


def write_gem_tables(scores: list[Score], study: Mapping, config: Mapping, tables: Path, plots: Path) -> None:
    """``config["models"]``: the (base, recipe) pairs the study evaluates, in table order."""
    models = [tuple(model) for model in config["models"]]
    if study.get("lm_eval_suite"):
        write_table(ifeval_table(scores, study, models), tables, "ifeval")
    headline, by_k = gsm8k_tables(scores, study, models)
    if not headline.empty:
        write_table(headline, tables, "gsm8k")
    if not by_k.empty:
        write_table(by_k, tables, "gsm8k_scaling")
        plot_scaling(by_k, Path(plots) / "gsm8k_scaling.png")
    if study.get("best_of_n"):
        best, by_n = chat_tables(scores, study, models)
        write_table(best, tables, "chat")
        write_table(by_n, tables, "chat_best_of_n")
        if study.get("judge_validation"):
            write_table(judge_table(scores, study), tables, "reward_model")
    diversity = {
        promptset: diversity_table(scores, study, models, promptset)
        for promptset in _evaluation_promptsets(study, "diversity")
    }
    for promptset, frame in diversity.items():
        write_table(frame, tables, f"diversity_{promptset}")
    if diversity:
        plot_diversity(diversity, Path(plots) / "diversity.png")
