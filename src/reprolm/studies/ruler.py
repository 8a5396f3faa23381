"""Ruler: length control with Meta Length Tokens (docs/studies/ruler.md, seed 000)."""

from __future__ import annotations

from collections.abc import Mapping

from reprolm.config.errors import ConfigError
from reprolm.studies.base import Study, register_study


class Ruler(Study):
    name = "ruler"
    tables = "reprolm.aggregate.length_tables:write_ruler_tables"
    caption = """\
        **PM** (precise match) and **FM** (flexible match) are the percentages of outputs whose word
        count (``\\w+`` tokens) lies in the target's PM or FM window; windows are half-open,
        ``lo < words <= hi``. Level and ``All`` rows pool the in/out counts of their targets; they
        are not means of per-target percentages. ``multi_mlt`` gives FM per target and their plain
        mean; ``self_mlt`` counts the MLT each Ruler model chose for itself, FM against that MLT's
        window and the mean word count; ``length_errors`` the exact-length rate and RMSE (open-ended
        targets excluded); ``ttest`` compares the lengths of Ruler and vanilla outputs (Welch's test by
        default, Student's with ``compat: original``); ``general`` the lm-eval suite (x100). Every
        figure (not the in/out and MLT counts, nor the t-test) has ``lo`` / ``hi`` columns: its 95%
        percentile bootstrap interval over prompts (over documents for lm-eval; a multi-MLT prompt's
        outputs at every target are drawn together), paired across models on the same prompts.
    """
    table_captions = {
        "tlg_levels": """\
            **PM** (precise match) and **FM** (flexible match) per model and target level: the
            percentage of outputs whose word count (``\\w+`` tokens) lies in the target's PM or FM
            window, windows half-open (``lo < words <= hi``); a level's and ``All``'s figures pool the
            in/out counts of their targets (not a mean of per-target percentages), with those counts
            beside them. ``lo`` / ``hi``: 95% percentile bootstrap interval over prompts (1000
            draws), paired across models on the same prompts.
        """,
        "tlg_targets": """\
            PM and FM (percent of outputs whose word count lies in the target's half-open window,
            ``lo < words <= hi``) per model and target length, with the in/out counts. ``lo`` /
            ``hi``: 95% percentile bootstrap interval over prompts, paired across models.
        """,
        "length_errors": """\
            Per model, the exact-length rate (percent of outputs with exactly the target's word
            count) and the RMSE of word count against the target, open-ended targets ("more than
            N") excluded. ``lo`` / ``hi``: 95% percentile bootstrap interval over prompts.
        """,
        "multi_mlt": """\
            One prompt answered at every target (multi-MLT): FM per target (percent within the
            target's half-open FM window) and their plain mean. ``lo`` / ``hi``: 95% percentile
            bootstrap interval over prompts, a prompt's outputs at every target drawn together.
        """,
        "self_mlt": """\
            Ruler models choosing their own MLT: how often each MLT was chosen (counts, no
            interval), FM against the chosen MLT's window and the mean word count. ``lo`` / ``hi``:
            95% percentile bootstrap interval over prompts.
        """,
        "ttest": """\
            Output lengths (words) of the Ruler model against vanilla SFT: means, the t statistic,
            degrees of freedom and two-sided p-value of Welch's test (Student's with ``compat:
            original``). A test, so no bootstrap interval; p-values at full precision.
        """,
        "general": """\
            The lm-eval suite (accuracies x100) of each model, to show that length control costs
            no general ability. ``lo`` / ``hi``: 95% percentile bootstrap interval over each
            task's documents.
        """,
    }
    plots_caption = (
        "PM and FM per target length, one panel per model, with their 95% bootstrap intervals "
        "(see the tables for the windows)."
    )

    def check_section(self, config: Mapping) -> None:
        # The windows themselves are checked with the rest of the config.
        if "length_targets" not in config:
            raise ConfigError("the ruler study needs length_targets ('paper' or a list)")

    def settings(self, config: Mapping) -> dict:
        return {"length_targets": config["length_targets"]}


register_study(Ruler())
