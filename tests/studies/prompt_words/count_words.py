"""The prompt_words study's metric: the word count of each prompt's first turn."""

import pyarrow.parquet as pq

from reprolm.io import write_json
from reprolm.length import count_words
from reprolm.provenance import tracked_step

with tracked_step(snakemake) as log:
    rows = pq.read_table(snakemake.input.dataset).to_pylist()
    words = [count_words(row["turns"][0]) for row in rows]
    log.info("%d prompts, %d words", len(words), sum(words))
    write_json({"metric": "prompt_words", "ids": [row["id"] for row in rows], "words": words}, snakemake.output[0])
