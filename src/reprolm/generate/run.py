"""The generation stage: a prompt set through a model, to a parquet of samples."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.parquet as pq

from reprolm.generate import GenerationRequest, SamplingParams, make_backend
from reprolm.generate.prompts import build_prompts
from reprolm.provenance import atomic_path
from reprolm.score.length import TargetSet

log = logging.getLogger(__name__)


def generate_promptset(*, model_path: str, dataset_file: str, promptset: dict, length_prompt: str,
                       targets: TargetSet, backend: str, backend_options: dict, seed: int,
                       output: str) -> int:
    rows = pq.read_table(dataset_file).to_pylist()
    engine = make_backend(backend, model_path, **backend_options)
    batch = build_prompts(promptset["prompt"], rows, engine.tokenizer, length_prompt, targets)
    sampling = SamplingParams(seed=seed, **promptset["sampling"])
    request = GenerationRequest(batch.prompts, sampling, stop=batch.stop,
                                skip_special_tokens=batch.skip_special_tokens)
    log.info("generating %s", request.describe())
    samples = engine.generate(request)
    records = [
        {**row, "prompt": prompt, "sample": index, "text": text}
        for row, prompt, texts in zip(rows, batch.prompts, samples, strict=True)
        for index, text in enumerate(texts)
    ]
    with atomic_path(output) as tmp:
        pq.write_table(pa.Table.from_pylist(records), tmp)
    return len(records)
