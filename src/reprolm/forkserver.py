"""A fork server for local runs: job scripts start from a process that has already imported
torch, transformers, lm-eval and the other heavy libraries.

Every job of a local run is a fresh Python process, and on a CPU machine importing those
libraries (about 4-5 s) costs more than most tiny-model jobs' work. The workflow starts one
server per local Snakemake run (``onstart``) of at least ``MIN_SCRIPT_JOBS`` job scripts and
names its socket in ``REPROLM_FORKSERVER``.
A job script's first statement, :func:`run_in_forkserver`, hands the script to the server,
which forks a child that takes over the job's standard streams, working directory,
environment and ``sys.path`` and runs the same script file; the script process waits for
the child's exit status and forwards signals to it. Jobs stay what they were: one job, one
script run, with the same outputs.

The server also fills a few caches of what the installed libraries say (``WARM_UPS``:
lm-eval's task index and environment report), once, before it forks the first job that asks
for them; they live in reprolm modules. A child keeps
the server's reprolm modules only while they are the code the job would import (same
package on its path, no source file changed since the server started); otherwise it drops
them and imports reprolm afresh, so code edited during a run is the code a job runs. The
socket takes its name only once the server is ready: a job that starts while the server is
still importing runs in its own process (for a run of a few jobs, waiting would cost more).

Without a server (cluster jobs, ``--no-hooks``, ``REPROLM_FORKSERVER=off``) or when it cannot
be reached, the script runs in its own process as before. Only the user who started the
server may hand it a script (socket mode 0600, peer credentials checked). The server counts
GPUs through NVML (``PYTORCH_NVML_BASED_CUDA_CHECK``), and once CUDA has started in it
anyway (a preloaded library or a warm-up) it serves no more jobs: a forked child could not
use CUDA then. One consequence to know: a local
job's ``benchmarks/`` file measures the waiting script process, so its wall time is the
job's but its memory and CPU columns are not; provenance records carry the job's own peak
memory and CPU seconds (``execution.resources``).
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
# Set in a forked job, so that its own run_in_forkserver() runs the script in place.
CHILD_VARIABLE = "REPROLM_FORKSERVER_CHILD"
# The Python environment the server runs in: a job run by another one (a rule's conda env
# under --software-deployment-method conda) runs in place, in its own environment.
PREFIX_VARIABLE = "REPROLM_FORKSERVER_PREFIX"
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
# Caches that hold only what the installed libraries say, filled by the server once, before
# it forks the first job that asks for them (``run_in_forkserver(warm_up=...)``).
WARM_UPS = {
    # lm-eval's index of its task YAMLs and its environment report: about 6 s per lm-eval job.
    "lm_eval": ("reprolm.score.lm_eval_bridge:task_manager", "reprolm.score.lm_eval_bridge:environment_report"),
}
# A run of fewer job scripts runs each in its own process: the server's imports (about 8 s of
# CPU) would cost more than those few jobs' own. Its jobs may be rerun or added to later.
MIN_SCRIPT_JOBS = 4
JOB_GC_THRESHOLD = 10_000
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


def collect_less_often() -> None:
    """For a process that imports the heavy libraries (millions of objects), then trains or
    scores (a job in its own process, a launched finetune worker): a young-generation
    collection every ``JOB_GC_THRESHOLD`` allocations instead of Python's 700 (a tiny
    finetune's collections: 1.4 -> 0.6 s of CPU)."""
    gc.set_threshold(JOB_GC_THRESHOLD, *gc.get_threshold()[1:])


def run_in_forkserver(warm_up: str | None = None) -> None:
    """The first statement of a job script: if a fork server serves this run, run the script
    there and exit with its status; otherwise (or inside the forked job) return at once.
    ``warm_up`` names the server's caches (``WARM_UPS``) the job uses."""
    address = os.environ.get(ADDRESS_VARIABLE)
    if os.environ.get(CHILD_VARIABLE):
        return
    if not address or address == OFF or os.environ.get(PREFIX_VARIABLE, sys.prefix) != sys.prefix:
        collect_less_often()
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
                "path": sys.path,
                "warm_up": warm_up,
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
        collect_less_often()
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
    # No status: the job died without reporting one (killed, out of memory).
    sys.exit(int(status) if status is not None else 1)


def _peer_uid(connection: socket.socket) -> int:
    pid_uid_gid = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", pid_uid_gid)[1]


def cuda_started(modules=None) -> bool:
    """Whether CUDA was initialised in this process (by a preloaded library or a warm-up),
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


def _reprolm_sources() -> dict[str, tuple[int, int]]:
    """The source files of the loaded reprolm modules, with their mtimes and sizes."""
    sources = {}
    for name, module in list(sys.modules.items()):
        if (name == "reprolm" or name.startswith("reprolm.")) and getattr(module, "__file__", None):
            stat = os.stat(module.__file__)
            sources[module.__file__] = (stat.st_mtime_ns, stat.st_size)
    return sources


def _keep_warm_reprolm(preloaded: dict[str, tuple[int, int]]) -> bool:
    """Whether the server's reprolm modules (and their warmed caches) are the code this job
    would import: the job's import path finds the same package, and no source file changed."""
    package = sys.modules.get("reprolm")
    if package is None:
        return False
    spec = next(
        (
            spec
            for finder in sys.meta_path
            if hasattr(finder, "find_spec")
            if (spec := finder.find_spec("reprolm", None)) is not None
        ),
        None,
    )
    if spec is None or spec.origin != package.__file__:
        return False
    try:
        return _reprolm_sources() == preloaded
    except OSError:
        return False


def _warm_up(name: str) -> None:
    for warm_up in WARM_UPS.get(name, ()):
        module, _, function = warm_up.partition(":")
        try:
            getattr(importlib.import_module(module), function)()
        except Exception as error:
            print(f"warm-up {warm_up} failed, each job does it itself: {error!r}", flush=True)
    if name not in WARM_UPS:
        print(f"no warm-up {name!r}; known: {sorted(WARM_UPS)}", flush=True)


@contextlib.contextmanager
def _frozen_heap():
    """The body (imports, a warm-up) runs without garbage collections, and the objects it
    leaves are frozen: kept out of the children's collections. A collection in a forked job
    walks every object the server made (lm-eval's task index alone: about 0.4 s of CPU per job)
    and, touching them, copies their memory pages into the job; and collections during the
    imports themselves walked the growing heap again and again (about a second of CPU)."""
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()
        gc.enable()


def _run_child(connection: socket.socket, request: dict, fds: list[int], preloaded: dict[str, tuple[int, int]]) -> None:
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
    os.environ[CHILD_VARIABLE] = "1"
    sys.argv = request["argv"]
    sys.path[:] = request["path"]
    importlib.invalidate_caches()
    if not _keep_warm_reprolm(preloaded):
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
        preloaded = _reprolm_sources()
        warmed: set[str] = set()
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
            if request.get("warm_up") and request["warm_up"] not in warmed:
                warmed.add(request["warm_up"])
                with _frozen_heap():
                    _warm_up(request["warm_up"])
                # A module keeps the state of its file when it was imported.
                preloaded = {**_reprolm_sources(), **preloaded}
                if cuda_started():
                    print(
                        f"warm-up {request['warm_up']!r} initialised CUDA, which forked jobs cannot use: "
                        "serving no more jobs, each runs in its own process",
                        flush=True,
                    )
                    for fd in fds:
                        os.close(fd)
                    connection.close()
                    return
            sys.stdout.flush()
            sys.stderr.flush()
            child = os.fork()
            if child == 0:
                listener.close()
                connection.settimeout(None)
                _run_child(connection, request, fds, preloaded)
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
    # Libraries that ask torch.cuda.is_available() at import or in a warm-up then count devices
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


def worth_serving(jobs: Iterable) -> bool:
    """Whether a run of these Snakemake jobs has enough job scripts to pay for a server."""
    return sum(1 for job in jobs if job.rule.script) >= MIN_SCRIPT_JOBS


def start(folder: str | os.PathLike, log_file: str | os.PathLike, jobs: Iterable) -> subprocess.Popen | None:
    """Start a server for this (Snakemake) process, whose run has ``jobs`` to do, and set
    ``REPROLM_FORKSERVER`` so that the jobs it starts use it (None when switched off, or when
    the run has too few job scripts for one). It serves until this process ends."""
    if os.environ.get(ADDRESS_VARIABLE) == OFF or not worth_serving(jobs):
        return None
    address = socket_address(folder)
    server = launch(address, log_file)
    os.environ[ADDRESS_VARIABLE] = address
    os.environ[PREFIX_VARIABLE] = sys.prefix
    return server


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2], int(sys.argv[3]))
