"""Records the top-level modules every Python process of the smoke imports (``run
--record-imports``): on PYTHONPATH, Python imports this at start-up in each process (the
Snakemake run, its jobs, the fork server's children, torchrun's workers). Each name is
appended once per process to ``$REPROLM_SMOKE_IMPORTS/<pid>``; the import itself goes on
unchanged (the finder finds nothing). The smoke maps the names to distributions afterwards."""

import os
import sys

FOLDER = os.environ.get("REPROLM_SMOKE_IMPORTS")


class ImportRecorder:
    def __init__(self, folder):
        self.folder = folder
        self.seen = {}

    def find_spec(self, name, path=None, target=None):
        if path is None and "." not in name:
            pid = os.getpid()
            names = self.seen.setdefault(pid, set())
            if name not in names:
                names.add(name)
                try:
                    with open(os.path.join(self.folder, str(pid)), "a") as record:
                        record.write(name + "\n")
                except OSError:
                    pass
        return None


if FOLDER:
    sys.meta_path.insert(0, ImportRecorder(FOLDER))
