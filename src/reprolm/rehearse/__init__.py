"""``reprolm rehearse``: a config proven on the cluster before its first GPU-hour.

``rehearsal`` runs it: the submissions (``submissions``, on the DAG from ``dag``) and the
dataset builds at the papers' sizes (``sizes``, whose figures ``reprolm plan`` reads).
"""
