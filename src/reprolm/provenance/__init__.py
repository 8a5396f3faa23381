"""Provenance: a record of where every output came from (:mod:`.records`), content hashes
(:mod:`.hashing`), folders replaced in place (:mod:`.replaced`), the job's environment and
SLURM allocation (:mod:`.environment`), secrets kept out (:mod:`.redaction`); lineage and
verification over the records (:mod:`.query`), and the code fingerprints that key reruns
(:mod:`.fingerprint`)."""

from reprolm.provenance.environment import execution_host
from reprolm.provenance.hashing import (
    PROVENANCE_NAME,
    SIDECAR_SUFFIX,
    content_hash,
    provenance_path,
    recorded_hash,
)
from reprolm.provenance.records import tracked_step
from reprolm.provenance.replaced import mark_replaced_folders

__all__ = [
    "PROVENANCE_NAME",
    "SIDECAR_SUFFIX",
    "content_hash",
    "execution_host",
    "mark_replaced_folders",
    "provenance_path",
    "recorded_hash",
    "tracked_step",
]
