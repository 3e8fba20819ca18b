"""Runs of the repository's tools in processes of their own (:mod:`.tool_process`), for the commands that compare models over
seeds (``tools/compare/compare_recipes.py``, ``tools/compare/compare_retrieval.py``, ``tools/compare/compare_pointing.py``):
one ``train_net.py`` run per model and seed, skipped by ``--resume`` when finished.

A run that was interrupted (the process killed) is continued by ``--resume`` from its last
checkpoint, with ``train_net.py --resume`` (exact: :mod:`..exact_resume`), when its folder's
``run_started.json`` shows it was started by the same command; any other unfinished or replaced
run's folder is emptied and the run trained from iteration 0."""
import json
import os
import shutil
import tempfile
import time

from .run_records import STARTED
from .tool_process import ROOT, run_python, tool_path

__all__ = ["ROOT", "STARTED", "SCHEDULE_KEYS", "run_tool", "finished", "train_run"]


def run_tool(tool: str, *args, log: str = None, append: bool = False) -> float:
    """``python tools/.../<tool> args...`` (:func:`~.tool_process.tool_path`), in a child of the fork server of :mod:`.tool_process`; its
    stdout and stderr go to ``log`` as they are written (added to its end with ``append``);
    returns its wall time in seconds. Raises with the end of its output when it fails."""
    path = tool_path(tool)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        output = log or os.path.join(tmp, "output.txt")
        if log:
            os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
            if not append:
                open(log, "w").close()
        status = run_python(path, args, output)
        if status:
            with open(output, errors="replace") as f:
                tail = f.read()[-3000:]
            raise RuntimeError(f"{' '.join([path, *map(str, args)])} failed (exit status {status}):\n{tail}")
    return time.perf_counter() - start


#: The options that make two runs of one model different runs: its budget, schedule and seed.
SCHEDULE_KEYS = ("SOLVER.MAX_ITER", "SOLVER.STEPS", "SEED")


def finished(out: str, resume: bool, records=None, command: list = None) -> bool:
    """Whether ``--resume`` skips the run in ``out``: it holds ``results.json``, or ``records``
    (a :class:`~phrasedet.engine.comparison.run_records.RunRecords`) restores it from its record.
    With ``command`` (the config file and its arguments, as :func:`train_run` starts it), a finished
    run whose ``run_started.json`` gives other :data:`SCHEDULE_KEYS` values (another budget, say) is
    not this run: its folder is emptied (printed) and the record, if it is of this schedule, restored;
    otherwise the run is not finished. Other options (paths, weights) are not compared: they name
    folders that differ between checkouts and machines."""
    if not resume:
        return False
    _drop_other_schedule(out, command, "a finished run")
    if records is not None and records.restore(out):
        _drop_other_schedule(out, command, "its record")
    return os.path.isfile(os.path.join(out, "results.json"))


def _schedule(command: list) -> dict:
    """The :data:`SCHEDULE_KEYS` values a command sets (the last one of a repeated key)."""
    words = [str(c) for c in command]
    return {w: words[i + 1] for i, w in enumerate(words[:-1]) if w in SCHEDULE_KEYS}


def _drop_other_schedule(out: str, command, what: str):
    """Empty ``out`` when it holds a finished run started with another schedule than ``command``'s."""
    started = _read_started(out)
    if command is None or started is None or not os.path.isfile(os.path.join(out, "results.json")):
        return
    before, now = _schedule(started["command"]), _schedule(command)
    if before != now:
        print(f"  {out}: {what} of another schedule ({before}, now {now}): not this run; its files removed", flush=True)
        shutil.rmtree(out)


def _start_afresh(out: str):
    """Empty ``out`` before a run trains into it from iteration 0. What an interrupted (or replaced)
    run left there would otherwise mix with the new run: Detectron2's ``metrics.json``, which its
    JSONWriter appends to (two curves in one file, two runs' evaluations in one record), and its
    ``model_best.pth``."""
    if os.path.isdir(out) and os.listdir(out):
        print(f"  {out}: an unfinished or replaced run's files removed; trained from the start", flush=True)
        shutil.rmtree(out)


def _read_started(out: str):
    """``out``'s ``run_started.json`` (the command that started its run, when, minutes before), or None."""
    path = os.path.join(out, STARTED)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def _interrupted_minutes(out: str, command: list):
    """The minutes spent so far by an interrupted run in ``out`` started by ``command``, or None
    when ``out`` holds no such run. An interrupted invocation's time is taken to its folder's
    newest file (its last log line or metrics record)."""
    started = _read_started(out)
    if started is None or started["command"] != command:
        return None
    newest = max(os.path.getmtime(os.path.join(d, n)) for d, _, names in os.walk(out) for n in names)
    return started["minutes_before"] + max(0.0, newest - started["time"]) / 60


def train_run(name: str, config: str, out: str, resume: bool, opts, flags=(), records=None) -> tuple:
    """One ``train_net.py`` run of ``config`` into ``out`` (skipped when resuming and finished),
    recorded in ``records`` when given (:func:`finished`). With ``resume``, a run of the same
    command that was interrupted continues from its last checkpoint (the module's docstring).

    Returns:
        (its ``results.json`` results: {task: metrics}, minutes of the run, its interrupted
        invocations included, kept in ``wall_time.json`` for ``--resume``).
    """
    results, timing = os.path.join(out, "results.json"), os.path.join(out, "wall_time.json")
    command = [config, *map(str, flags), *map(str, opts)]
    if not finished(out, resume, records, command):
        before = _interrupted_minutes(out, command) if resume and "--eval-only" not in flags else None
        if before is None:
            _start_afresh(out)
        else:
            print(f"  {out}: the interrupted run continued from its last checkpoint ({before:.1f} min spent before)", flush=True)
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, STARTED), "w") as f:
            json.dump({"command": command, "time": time.time(), "minutes_before": before or 0.0}, f)
        minutes = (before or 0.0) + run_tool("train_net.py", "--config-file", config, *flags, *(["--resume"] if before is not None else []),
                                             "OUTPUT_DIR", out, *opts, log=os.path.join(out, "train_net.log"),
                                             append=before is not None) / 60
        with open(timing, "w") as f:
            json.dump({"minutes": minutes}, f)
        print(f"  {name}: {minutes:.1f} min", flush=True)
        if records is not None:
            records.save(out, name=name)
    with open(results) as f:
        metrics = json.load(f)["results"]
    with open(timing) as f:
        return metrics, json.load(f)["minutes"]
