"""A fork server for local runs: job scripts start from a process that has already imported
torch, transformers, lm-eval and the other heavy libraries.

Every job of a local run is a fresh Python process, and on a CPU machine importing those
libraries (about 4-5 s) costs more than most tiny-model jobs' work. The workflow's ``onstart``
calls :func:`start`, the one place that chooses this launcher: for a local run of at least
``MIN_SCRIPT_JOBS`` served job scripts it starts one server, names its socket in
``REPROLM_FORKSERVER`` and puts ``workflow/launcher`` on the jobs' ``PYTHONPATH``. There a
``sitecustomize`` calls :func:`hand_off` as the Python process of a job script starts, before
the script's first line: the script process hands the script to the server, which forks a
child that takes over the job's standard streams, working directory, environment and
``sys.path`` and runs the same script file; the script process waits for the child's exit
status and forwards signals to it. Job scripts know nothing of it, and jobs stay what they
were: one job, one script run, with the same outputs. The child imports ``reprolm`` afresh
from the job's own path, so code edited during a run is the code a job runs.

Every job script of the run is served, benchmarked rules' too: those are most of a local run's
jobs (generations, gradings, finetunes), and their imports are most of what the server saves.
Snakemake measures a job's process tree, which a forked child is not part of, so a served
job's ``benchmarks/`` file has the job's wall time but the waiting script process's memory and
CPU; the job's own CPU time and peak memory are in its provenance record
(``execution.usage``, measured inside the child), which ``reprolm cost`` and ``reprolm plan``
read. ``REPROLM_FORKSERVER=off`` gives benchmark files that measure every job, as cluster runs
always have. The socket takes its name only once
the server is ready: a job that starts while the server is still importing runs in its own
process (for a run of a few jobs, waiting would cost more).

Without a server (cluster jobs, ``--no-hooks``, ``REPROLM_FORKSERVER=off``, a rule's conda
environment) or when it cannot be reached, the script runs in its own process. Only the user
who started the server may hand it a script (socket mode 0600, peer credentials checked). The
server counts GPUs through NVML (``PYTORCH_NVML_BASED_CUDA_CHECK``), and once CUDA has started
in it anyway (a preloaded library) it serves no job: a forked child could not use CUDA then.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterable
from pathlib import Path

ADDRESS_VARIABLE = "REPROLM_FORKSERVER"
OFF = "off"
# The Python environment the server runs in: a job run by another one (a rule's conda env
# under --software-deployment-method conda) runs in place, in its own environment.
# workflow/launcher/sitecustomize.py reads it by this name.
PREFIX_VARIABLE = "REPROLM_FORKSERVER_PREFIX"
# The file names of the served job scripts, separated by os.pathsep.
SCRIPTS_VARIABLE = "REPROLM_FORKSERVER_SCRIPTS"
# Where Snakemake writes a job's script (preamble and source) before it runs it with Python:
# .snakemake/scripts/tmp<random>.<the script's file name>.
SNAKEMAKE_SCRIPTS = (".snakemake", "scripts")
# Imported once by the server; each library is left out if it is not installed. vLLM is
# never preloaded: it initialises CUDA, which does not survive a fork.
PRELOADED = (
    "torch",
    "numpy",
    "pyarrow.parquet",
    "pandas",
    "scipy.stats",
    "tokenizers",
    "safetensors.torch",
    "transformers",
    "transformers.models.llama.modeling_llama",
    "transformers.models.qwen2.modeling_qwen2",
    "transformers.models.gpt_neox.modeling_gpt_neox",
    "transformers.models.auto.tokenization_auto",
    "datasets",
    "peft",
    "trl",
    "lm_eval",
    "lm_eval.evaluator",
    "lm_eval.tasks",
    "sacrebleu",
)
# A run of fewer served job scripts runs each in its own process: the server's imports (about
# 8 s of CPU) would cost more than those few jobs' own. Its jobs may be rerun or added to later.
MIN_SCRIPT_JOBS = 4
# How long the server waits for a connected job's request.
REQUEST_TIMEOUT_S = 30
# Unix socket paths are limited to 108 bytes (104 on macOS).
MAX_SOCKET_PATH = 100
PRIVATE_FOLDER_PREFIX = "reprolm-forkserver-"
_HEADER = struct.Struct("!I")


def _send_message(connection: socket.socket, payload: dict, fds: list[int] = ()) -> None:
    data = json.dumps(payload).encode()
    socket.send_fds(connection, [_HEADER.pack(len(data)) + data], list(fds))


def _receive_message(connection: socket.socket, max_fds: int = 0) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(connection, 1 << 20, max_fds)
    if len(data) < _HEADER.size:
        raise ConnectionError("fork server: connection closed before a message")
    (length,) = _HEADER.unpack_from(data)
    while len(data) < _HEADER.size + length:
        chunk = connection.recv(1 << 20)
        if not chunk:
            raise ConnectionError("fork server: connection closed inside a message")
        data += chunk
    return json.loads(data[_HEADER.size : _HEADER.size + length]), fds


def _read_line(replies) -> str | None:
    """One line from the server's replies (a buffered reader: the pid and the exit status
    of a quick job can arrive in one packet)."""
    line = replies.readline()
    return line.decode().strip() if line.endswith(b"\n") else None


def served_script(argv0: str) -> bool:
    """Whether ``argv0`` is Snakemake's copy of a job script this run's server serves."""
    path = Path(argv0)
    served = os.environ.get(SCRIPTS_VARIABLE, "").split(os.pathsep)
    return (path.parent.parent.name, path.parent.name) == SNAKEMAKE_SCRIPTS and path.name.partition(".")[2] in served


def hand_off() -> None:
    """As a job script's Python process starts (workflow/launcher/sitecustomize.py): if this
    run's fork server serves the script, run it there and exit with its status; otherwise
    return at once and the script runs in this process."""
    address = os.environ.get(ADDRESS_VARIABLE)
    if not address or address == OFF or os.environ.get(PREFIX_VARIABLE) != sys.prefix:
        return
    if not served_script(sys.argv[0]):
        return
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(address)
        _send_message(
            connection,
            {
                "script": os.path.abspath(sys.argv[0]),
                "argv": sys.argv,
                "cwd": os.getcwd(),
                "env": dict(os.environ),
                # What Python puts first on a script's path once site (this) is imported.
                "path": [os.path.dirname(os.path.abspath(sys.argv[0])), *sys.path],
            },
            [0, 1, 2],
        )
        replies = connection.makefile("rb")
        pid_line = _read_line(replies)
    except OSError:
        pid_line = None
    if pid_line is None:
        # The server is gone (or served nothing) and no job process started: run in place.
        connection.close()
        return
    child = int(pid_line)

    def forward(signum, _frame):
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    status = _read_line(replies)
    # No status: the job died without reporting one (killed, out of memory). Python is still
    # starting (site imports this): it ends here, without unwinding its start-up.
    os._exit(int(status) if status is not None else 1)


def _peer_uid(connection: socket.socket) -> int:
    pid_uid_gid = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", pid_uid_gid)[1]


def cuda_started(modules=None) -> bool:
    """Whether CUDA was initialised in this process (by a preloaded library),
    which a forked child could not use ("Cannot re-initialize CUDA in forked subprocess"):
    the server then serves no job."""
    torch = (sys.modules if modules is None else modules).get("torch")
    if torch is None:
        return False
    if torch.cuda.is_initialized():
        return True
    # Counting devices the default way (torch.cuda.is_available()) starts the CUDA driver
    # without is_initialized() saying so; torch marks a child forked after that as in a bad fork.
    read, write = os.pipe()
    probe = os.fork()
    if probe == 0:
        os.close(read)
        os.write(write, b"1" if torch.cuda._is_in_bad_fork() else b"0")
        os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    try:
        os.waitpid(probe, 0)
    except ChildProcessError:
        pass  # reaped already: the server ignores SIGCHLD
    return answer == b"1"


@contextlib.contextmanager
def _frozen_heap():
    """The body (the imports) runs without garbage collections, and the objects it leaves are
    frozen: kept out of the children's collections. A collection in a forked job would walk
    every object the server made and, touching them, copy their memory pages into the job;
    collections during the imports themselves walked the growing heap again and again (about
    a second of CPU)."""
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()
        gc.enable()


def _run_child(connection: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: become the job described by the script process's request."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = request["argv"]
    sys.path[:] = request["path"]
    importlib.invalidate_caches()
    # The job imports reprolm from its own path, as it is now.
    for name in [name for name in sys.modules if name == "reprolm" or name.startswith("reprolm.")]:
        del sys.modules[name]
    # Snakemake sets the job's thread count in OMP_NUM_THREADS, which torch read only at import.
    torch = sys.modules.get("torch")
    if torch is not None and os.environ.get("OMP_NUM_THREADS", "").isdigit():
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    connection.sendall(f"{os.getpid()}\n".encode())
    status = 0
    try:
        import runpy

        runpy.run_path(request["script"], run_name="__main__")
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, int) and stop.code is not None:
            print(stop.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        status = 1
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    connection.sendall(f"{status}\n".encode())
    os._exit(status)


def serve(listener: socket.socket, address: str, parent: int) -> None:
    """Preload the libraries, then fork one child per job that connects to ``listener`` (bound
    to ``address`` and listening, see :func:`launch`) until ``parent`` (the Snakemake process)
    has gone."""
    # Stopped from outside, it still removes its socket.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        with _frozen_heap():
            for name in PRELOADED:
                if os.getppid() != parent:
                    return
                try:
                    importlib.import_module(name)
                except ImportError:
                    continue
        if cuda_started():
            print(
                "a preloaded library initialised CUDA, which forked jobs cannot use: serving no job, "
                "each runs in its own process",
                flush=True,
            )
            return
        listener.settimeout(1.0)
        # Ready: jobs that start from now on find the socket.
        os.replace(address + ".binding", address)
        print(f"serving {address} for process {parent}", flush=True)
        # Children report their status over their own connection; nobody waits for them here.
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
        while os.getppid() == parent:
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            if _peer_uid(connection) != os.getuid():
                connection.close()
                continue
            try:
                connection.settimeout(REQUEST_TIMEOUT_S)
                request, fds = _receive_message(connection, max_fds=3)
            except (OSError, ValueError):
                connection.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            child = os.fork()
            if child == 0:
                listener.close()
                connection.settimeout(None)
                _run_child(connection, request, fds)
            print(f"forked job process {child}", flush=True)
            for fd in fds:
                os.close(fd)
            connection.close()
    finally:
        # Jobs still queued find the connection closed before an answer and run in place.
        listener.close()
        Path(address).unlink(missing_ok=True)
        Path(address + ".binding").unlink(missing_ok=True)
        if Path(address).parent.name.startswith(PRIVATE_FOLDER_PREFIX):
            Path(address).parent.rmdir()


def socket_address(folder: str | os.PathLike) -> str:
    """Where this process's server listens: in ``folder`` (made private), or, when that path
    is too long for a Unix socket (a deeply nested working directory), in a private
    temporary folder."""
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    address = folder / f"forkserver-{os.getpid()}.sock"
    if len(str(address)) > MAX_SOCKET_PATH:
        address = Path(tempfile.mkdtemp(prefix=PRIVATE_FOLDER_PREFIX)) / "forkserver.sock"
    return str(address)


def launch(address: str, log_file: str | os.PathLike) -> subprocess.Popen:
    """Start a server for ``address`` in the background, serving until this process ends.
    The socket is bound here and renamed to ``address`` by the server once it is ready; a
    server that fails never takes the name, and jobs run in place."""
    for stale in (address, address + ".binding"):
        Path(stale).unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address + ".binding")
    # The server runs any script it is handed as this user: only this user may connect.
    os.chmod(address + ".binding", 0o600)
    listener.listen(64)
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    # Libraries that ask torch.cuda.is_available() at import then count devices
    # through NVML, which leaves CUDA to the forked jobs (each job has its own environment).
    environment = {**os.environ, "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
    with open(log_file, "ab") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "reprolm.forkserver", str(listener.fileno()), address, str(os.getpid())],
            pass_fds=[listener.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env=environment,
        )
    listener.close()
    return server


def served_scripts(jobs: Iterable) -> set[str]:
    """The file names of the job scripts a server would serve for these Snakemake jobs (every
    rule's script; Snakemake's copy of a script keeps only the file name)."""
    return {Path(job.rule.script).name for job in jobs if job.rule.script}


def start(
    folder: str | os.PathLike, log_file: str | os.PathLike, jobs: Iterable, launcher: str | os.PathLike
) -> subprocess.Popen | None:
    """Start a server for this (Snakemake) process, whose run has ``jobs`` to do, and set the
    environment of the jobs it starts so that their served scripts go to it: its address, the
    scripts it serves, and ``launcher`` (the folder of the sitecustomize that hands them off)
    first on ``PYTHONPATH``. None when switched off (``REPROLM_FORKSERVER=off``) or when the
    run has too few served job scripts for one. It serves until this process ends."""
    jobs = list(jobs)
    scripts = served_scripts(jobs)
    served = sum(1 for job in jobs if job.rule.script and Path(job.rule.script).name in scripts)
    if os.environ.get(ADDRESS_VARIABLE) == OFF or served < MIN_SCRIPT_JOBS:
        return None
    address = socket_address(folder)
    server = launch(address, log_file)
    os.environ[ADDRESS_VARIABLE] = address
    os.environ[PREFIX_VARIABLE] = sys.prefix
    os.environ[SCRIPTS_VARIABLE] = os.pathsep.join(sorted(scripts))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(launcher), os.environ.get("PYTHONPATH")]))
    return server


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2], int(sys.argv[3]))
