"""``reprolm rehearse``: a config proven on the cluster before its first GPU-hour.

``rehearsal`` runs it: the submissions (``submissions``, on the DAG from ``dag``), what the run
needs from the login node (``login_node``: hub access, API keys, disk), each GPU job's memory
against its GPUs (``gpu_memory``) and the dataset builds at the papers' sizes (``sizes``,
whose figures ``reprolm plan`` reads).
"""
