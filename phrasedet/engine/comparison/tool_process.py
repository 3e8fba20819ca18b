"""The repository's tools (``tools/train_net.py`` and the scripts in ``tools/*/``) run as child
processes of a fork server that has imported torch, Detectron2 and phrasedet once.

A comparison (``tools/compare/compare_*.py``) trains each model and seed in a process of its own, so that
no run inherits another's registries, loggers or random state. Started with ``python tool.py``,
each such process spent about 10 s of one core importing torch, torchvision (which imports
torch._dynamo and sympy), Detectron2, gensim, scipy and nltk before its first line of work: most of
a test's tiny run, and most of the test suite's time. Here each run is instead a child forked from
a server (Python's ``multiprocessing`` "forkserver") whose only work was those imports; the child
then behaves as a fresh ``python tool.py args`` would:

- its ``sys.argv``, working directory and environment are the caller's at the call (not the
  server's, which were the caller's when the server started); torch's thread count follows the
  caller's ``OMP_NUM_THREADS`` (libgomp read it once, in the server); the processes it starts
  (DataLoader workers) start as the caller's would (by default "fork" on Linux, not "forkserver");
- its stdout and stderr (file descriptors 1 and 2, so C++ and subprocess output too) go to one
  file, in the order written;
- its exit status is the tool's: 0, the code of ``SystemExit``, 1 after an uncaught exception
  (its traceback in the file) or minus the signal that killed it.

The server never ran an operator (no OpenMP pool, no CUDA context), which is what makes forking
it safe. Where the "forkserver" start method does not exist (Windows), a plain subprocess runs
the tool.
"""
import glob
import multiprocessing
import os
import runpy
import subprocess
import sys

__all__ = ["ROOT", "run_python", "tool_path"]

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))  # the repository


def tool_path(name: str) -> str:
    """The path of the tool ``name`` (``"train_net.py"``; the script's file name): ``tools/`` keeps
    ``train_net.py`` at its top and groups the other scripts by purpose (``tools/compare/``,
    ``tools/benchmarks/``, ``tools/data/``, ...), and a name is unique across them. A name with a
    folder (``"compare/compare_recipes.py"``) is taken as it is."""
    tools = os.path.join(ROOT, "tools")
    candidates = [os.path.join(tools, name)] + ([] if "/" in name else glob.glob(os.path.join(tools, "*", name)))
    found = [p for p in candidates if os.path.isfile(p)]
    if len(found) != 1:
        raise FileNotFoundError(f"no single tool {name!r} under {tools}: {found or 'none'}")
    return found[0]


#: What the server imports before it forks: everything ``tools/train_net.py`` imports.
PRELOAD = ("torch", "torchvision", "detectron2.engine", "detectron2.evaluation", "phrasedet", "phrasedet.engine",
           "phrasedet.evaluation", "phrasedet.modeling")


def _context():
    """The fork server's context, its preload set (it takes effect when the server starts)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    return context


def _threads(env: dict) -> int:
    """torch's thread count for a fresh process with ``env``: ``OMP_NUM_THREADS``, else the CPUs
    this process may run on (what libgomp, and so torch, defaults to)."""
    value = env.get("OMP_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _child(path: str, args: list, output: str, env: dict, cwd: str, start_method):
    """In the forked child: ``python path args`` as a fresh process would run it (module docstring)."""
    # a child of the fork server inherits "forkserver" as its default start method; a fresh process has the
    # platform's (Linux: "fork"), which its DataLoader workers and any other process it starts then use
    multiprocessing.set_start_method(start_method, force=True)
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    import torch

    torch.set_num_threads(_threads(env))
    sys.argv = [path, *args]
    sys.path[:0] = [os.path.dirname(path), ROOT]  # as ``python path`` with PYTHONPATH=ROOT
    runpy.run_path(path, run_name="__main__")


def run_python(path: str, args, output: str, env: dict = None, cwd: str = None, timeout: float = None) -> int:
    """Run the script ``path`` with ``args`` as ``python path args`` would, in a child of the
    fork server; its stdout and stderr are added to the end of the file ``output``.

    Args:
        path: a Python script (``tools/train_net.py``).
        args: its command-line arguments (made strings).
        output: the file that receives its stdout and stderr (created if missing).
        env: its environment (default: this process's now), with ``PYTHONPATH`` = the repository.
        cwd: its working directory (default: this process's now).
        timeout: seconds after which it is killed and ``TimeoutError`` raised (default: none).

    Returns:
        its exit status: 0 on success; negative: minus the signal that ended it.
    """
    env = {**(os.environ if env is None else env), "PYTHONPATH": ROOT}
    cwd = os.getcwd() if cwd is None else cwd
    args = [str(a) for a in args]
    if "forkserver" not in multiprocessing.get_all_start_methods():
        with open(output, "a") as f:
            try:
                return subprocess.run([sys.executable, path, *args], stdout=f, stderr=subprocess.STDOUT, env=env,
                                      cwd=cwd, timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                raise TimeoutError(f"{path} {' '.join(args)} ran past {timeout} s: killed") from None
    start_method = multiprocessing.get_start_method(allow_none=True)  # None: the platform's default
    process = _context().Process(target=_child, args=(os.path.abspath(path), args, os.path.abspath(output), env, cwd,
                                                      start_method))
    process.start()
    process.join(timeout)
    if process.exitcode is None:
        process.kill()
        process.join()
        raise TimeoutError(f"{path} {' '.join(args)} ran past {timeout} s: killed")
    return process.exitcode
