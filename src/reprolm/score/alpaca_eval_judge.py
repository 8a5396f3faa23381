"""AlpacaEval 2.0 as its authors run it, through the ``alpaca_eval`` package: its pairwise
annotator (``weighted_alpaca_eval_gpt4_turbo`` by default: GPT-4 Turbo's log-probabilities
of the two model identifiers, the pair order shuffled per instruction) and its metrics
(win rate, standard error, discrete win rate, and the length-controlled win rate from its
GLM, ``length_controlled_v1``, whose terms include each instruction's difficulty).

The GLM reads the gamed baselines' verdicts and the instruction difficulties from
``df_gamed.csv`` in the ``tatsu-lab/alpaca_eval`` hub dataset, which the package fetches
itself. Compute nodes are offline, so a source of schema ``alpaca_eval_gamed`` (made by the
download rule) is handed to the package in place of that fetch. Instructions are matched to
their difficulty by the prompt set's row ids, which are the rows' positions in AlpacaEval's
805 instructions.

Each pair's verdict is kept in the judge's cache (:mod:`reprolm.score.judge_cache`), keyed
by what the package builds its request from (annotator, package version, instruction, both
outputs). The package's own cache (``caching_path``) is not used: its key names neither the
endpoint nor the judge's settings, it rewrites one JSON file of all annotations in place (a
job killed while writing loses every verdict, and the next fails reading it), and it keeps
the missing verdicts of requests that failed as answers.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

from reprolm.score.api_requests import DEFAULT_MAX_RETRIES, request_failure
from reprolm.score.judge_cache import JudgeCache
from reprolm.stats.bootstrap import each_draw
from reprolm.stats.estimate import RESAMPLES, Estimate

log = logging.getLogger(__name__)

# AlpacaEval 2.0's length-control GLM (its annotator: reprolm.score.judges.DEFAULT_ANNOTATOR).
GLM = "length_controlled_v1"
HUB_DATASET = "tatsu-lab/alpaca_eval"
GAMED_FILE = "df_gamed.csv"
# Pairs handed to the package per call, their verdicts stored after each: a job killed
# halfway keeps all but the last call's. The package sends a call's requests 5 at a time.
PAIRS_PER_CALL = 32


class AlpacaEvalJudge:
    kind = "alpaca_eval"
    scale = "preference for the answer over the reference (0-1)"

    def __init__(
        self,
        annotator: str,
        base_url: str,
        api_key_env: str,
        gamed_annotations: str,
        max_retries: int = DEFAULT_MAX_RETRIES,
        name: str | None = None,
        cache: JudgeCache | None = None,
        lc_resamples: int = RESAMPLES,
    ):
        """``lc_resamples``: bootstrap draws of the length-controlled win rate, each refitting
        the package's GLM. ``max_retries``: the OpenAI client's retries of a transient failure (no connection,
        HTTP 408, 409, 429, 5xx; exponential backoff or the server's Retry-After). On top, the
        package asks again up to 10 times, 2 s apart, after an error whose message mentions a
        rate limit, and then gives a missing verdict (counted as unparsed, never cached)."""
        import alpaca_eval

        from reprolm.data.sources import read_source

        self.name = name or annotator
        key = os.environ.get(api_key_env)
        if not key:
            raise ValueError(
                f"AlpacaEval judge {self.name!r} at {base_url}: environment variable "
                f"{api_key_env!r} (its API key) is not set"
            )
        configs = Path(alpaca_eval.__file__).parent / "evaluators_configs"
        if not (configs / annotator / "configs.yaml").is_file():
            known = sorted(p.name for p in configs.iterdir() if (p / "configs.yaml").is_file())
            raise ValueError(
                f"alpaca_eval {alpaca_eval.__version__} has no annotator {annotator!r}; it has {', '.join(known)}"
            )
        self.annotator, self.base_url, self._key, self.max_retries = annotator, base_url, key, max_retries
        self.cache = cache if cache is not None else JudgeCache({})
        self.lc_resamples = lc_resamples
        self.version = alpaca_eval.__version__
        self.gamed = read_source(gamed_annotations, "alpaca_eval_gamed")
        self.gamed_source = gamed_annotations
        self.instructions_known = {record["index"] for record in self.gamed}

    @property
    def protocol(self) -> str:
        return f"AlpacaEval 2.0 (alpaca_eval {self.version}, annotator {self.annotator})"

    @property
    def lc_method(self) -> str:
        return f"alpaca_eval's GLM {GLM} (length, instruction difficulty, regularised to the gamed baselines)"

    def score(self, conversations):
        raise ValueError(
            f"the AlpacaEval judge {self.annotator!r} compares two answers; it gives no single "
            "grade (grade with a chat_endpoint or reward_model judge)"
        )

    def annotate(self, instructions: Sequence[str], answers: Sequence[str], references: Sequence[str]) -> list[float]:
        """AlpacaEval's preference per pair, in its encoding: 1 the reference, 2 the answer
        (the weighted annotator gives values in between), NaN where it gave none. Pairs
        judged before are answered from the cache."""
        pairs = list(zip(instructions, references, answers, strict=True))

        def ask(positions: list[int]) -> list[float]:
            return self._annotate([pairs[p] for p in positions])

        requests = [
            (
                {
                    "alpaca_eval": self.version,
                    "annotator": self.annotator,
                    "instruction": instruction,
                    "output_1": reference,
                    "output_2": answer,
                },
                [answer, reference],
            )
            for instruction, reference, answer in pairs
        ]
        return self.cache.fetch_many(
            requests, ask, per_call=PAIRS_PER_CALL, keep=lambda preference: not math.isnan(preference)
        )

    def _annotate(self, pairs: Sequence[tuple[str, str, str]]) -> list[float]:
        """The package's verdicts on (instruction, reference, answer) triples."""
        import openai
        from alpaca_eval.annotators import PairwiseAnnotator

        # caching_path=None: the package's own cache would live inside its install folder.
        annotator = PairwiseAnnotator(annotators_config=self.annotator, caching_path=None)
        try:
            annotations = annotator.annotate_head2head(
                outputs_1=[{"instruction": i, "output": r} for i, r, _ in pairs],
                outputs_2=[{"instruction": i, "output": a} for i, _, a in pairs],
                is_ordered=True,
                # The client from these arguments, not from a client-config file or the environment.
                client_config_path="",
                openai_api_keys=[self._key],
                openai_api_base=self.base_url,
                openai_organization_ids=None,
                client_kwargs={"max_retries": self.max_retries},
            )
        except (openai.APIStatusError, openai.APIConnectionError) as error:
            # Not chained: the client's error repeats the endpoint's body unmasked.
            raise request_failure(self.name, self.base_url, error, self.max_retries, self._key) from None
        return [math.nan if a.get("preference") is None else float(a["preference"]) for a in annotations]

    def prefer(self, instructions: Sequence[str], answers: Sequence[str], references: Sequence[str]) -> list[float]:
        return [p - 1.0 for p in self.annotate(instructions, answers, references)]

    def win_rates(
        self,
        ids: Sequence[int],
        instructions: Sequence[str],
        answers: Sequence[str],
        references: Sequence[str],
        answers_file: str = "answers",
    ) -> dict:
        """The package's leaderboard metrics for the answers against the references, the
        replicates of its length-controlled win rate (:meth:`length_controlled_estimate`) and,
        per pair, the verdict and both lengths (the tables resample the rest from these)."""
        self._check_ids(ids, answers_file)
        preferences = self.annotate(instructions, answers, references)
        length_controlled = self.length_controlled_estimate(ids, preferences, answers, references)
        return {
            **self.metrics(ids, preferences, answers, references, answers_file),
            "lc_win_rate_replicates": length_controlled.replicates.tolist(),
            "preferences": [p - 1.0 for p in preferences],
            "answer_lengths": [len(a) for a in answers],
            "reference_lengths": [len(r) for r in references],
        }

    def metrics(
        self,
        ids: Sequence[int],
        preferences: Sequence[float],
        answers: Sequence[str],
        references: Sequence[str],
        answers_file: str = "answers",
    ) -> dict:
        """``get_length_controlled_winrate`` on verdicts in AlpacaEval's encoding."""
        kept = [i for i, p in enumerate(preferences) if not math.isnan(p)]
        if not kept:
            raise ValueError(
                f"{answers_file}: the AlpacaEval judge gave no usable verdict on any of {len(preferences)} pairs"
            )
        with self._length_control_data():
            metrics = _package_metrics(self._annotations(ids, preferences, answers, references), warn=True)
        return {
            "win_rate": float(metrics["win_rate"]),
            "standard_error": float(metrics["standard_error"]),
            "discrete_win_rate": float(metrics["discrete_win_rate"]),
            "n_wins": int(metrics["n_wins"]),
            "n_draws": int(metrics["n_draws"]),
            "lc_win_rate": float(metrics["length_controlled_winrate"]),
            "lc_standard_error": float(metrics["lc_standard_error"]),
            "lc_method": self.lc_method,
            "n": len(kept),
            "unparsed": len(preferences) - len(kept),
            "mean_length": float(sum(len(answers[i]) for i in kept) / len(kept)),
            "mean_reference_length": float(sum(len(references[i]) for i in kept) / len(kept)),
        }

    def length_controlled_estimate(
        self, ids: Sequence[int], preferences: Sequence[float], answers: Sequence[str], references: Sequence[str]
    ) -> Estimate:
        """The package's length-controlled win rate with its GLM refitted on each bootstrap
        draw of the prompts (by their ids, so the draws are those of every other figure over
        these prompts). Its ``lc_standard_error`` is no such interval: it is the spread of the
        GLM's predictions over the instructions, which their difficulty term alone makes.
        The GLM is fitted on the scoring node: the table job has no length-control data."""
        annotations = self._annotations(ids, preferences, answers, references)
        with self._length_control_data():
            return each_draw(
                list(ids),
                lambda rows: float(_package_metrics(annotations.iloc[rows], warn=False)["length_controlled_winrate"]),
                self.lc_resamples,
            )

    def _annotations(
        self, ids: Sequence[int], preferences: Sequence[float], answers: Sequence[str], references: Sequence[str]
    ):
        """The frame the package's metrics read, indexed by the instructions' positions (how
        it finds their difficulty)."""
        import pandas as pd

        return pd.DataFrame(
            {
                "output_1": list(references),
                "output_2": list(answers),
                "preference": list(preferences),
                "generator_1": "reference",
                "generator_2": "answers",
                "annotator": self.annotator,
            },
            index=pd.Index(list(ids)),
        )

    def _check_ids(self, ids: Sequence[int], answers_file: str) -> None:
        if len(set(ids)) != len(ids):
            raise ValueError(
                f"{answers_file}: AlpacaEval takes one answer per instruction; prompt ids repeat "
                "(sample once: sampling.n 1)"
            )
        unknown = [i for i in ids if i not in self.instructions_known]
        if unknown:
            raise KeyError(
                f"{answers_file}: prompt ids {unknown[:5]} are not AlpacaEval instruction positions "
                f"known to {self.gamed_source} (it has {len(self.instructions_known)}); build the prompt "
                "set from the whole alpaca_eval split, in order"
            )

    @contextmanager
    def _length_control_data(self):
        """While active, the package's GLM reads this judge's gamed annotations."""
        with self._gamed_file() as gamed_file, _hub_file(gamed_file):
            yield

    @contextmanager
    def _gamed_file(self):
        import pandas as pd

        with tempfile.TemporaryDirectory(prefix="reprolm-alpaca-eval-") as folder:
            path = Path(folder) / GAMED_FILE
            pd.DataFrame(self.gamed).to_csv(path, index=False)
            yield path


def _package_metrics(annotations, warn: bool) -> dict:
    """The package's metrics of one frame of annotations, under :meth:`AlpacaEvalJudge._length_control_data`.
    ``warn``: its warning that the length-controlled figure is far from the raw one (not
    wanted on every bootstrap draw)."""
    from alpaca_eval.metrics.glm_winrate import get_length_controlled_winrate

    return get_length_controlled_winrate(
        annotations,
        glm_name=GLM,
        save_weights_dir=None,
        is_add_glm_preference_inplace=False,
        is_warn_extreme_changes=warn,
    )


@contextmanager
def _hub_file(gamed_file: Path):
    """While active, the package's fetch of ``df_gamed.csv`` from the hub returns
    ``gamed_file``; any other fetch fails, naming the file."""
    from alpaca_eval.metrics import glm_winrate

    def fetch(repo_id: str, filename: str, **_options) -> str:
        if (repo_id, filename) != (HUB_DATASET, GAMED_FILE):
            raise RuntimeError(
                f"alpaca_eval asked the hub for {repo_id}/{filename}; reprolm hands it only {HUB_DATASET}/{GAMED_FILE}"
            )
        return str(gamed_file)

    hub_download = glm_winrate.hf_hub_download
    glm_winrate.hf_hub_download = fetch
    try:
        yield
    finally:
        glm_winrate.hf_hub_download = hub_download
