"""Runs of the repository's tools in subprocesses, for the commands that compare models over
seeds (``tools/compare_retrieval.py``, ``tools/compare_pointing.py``): one ``train_net.py`` run
per model and seed, skipped by ``--resume`` when finished."""
import json
import os
import shutil
import subprocess
import sys
import time

__all__ = ["ROOT", "run_tool", "finished", "train_run"]

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run_tool(tool: str, *args, log: str = None) -> float:
    """``python tools/<tool> args...``; its output goes to ``log``; returns its wall time in seconds.
    Raises with the end of its stderr when it fails."""
    cmd = [sys.executable, os.path.join(ROOT, "tools", tool), *map(str, args)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT})
    if log:
        with open(log, "w") as f:
            f.write(proc.stdout + proc.stderr)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def finished(out: str, resume: bool, records=None) -> bool:
    """Whether ``--resume`` skips the run in ``out``: it holds ``results.json``, or ``records``
    (a :class:`~phrasedet.engine.run_records.RunRecords`) restores it from its record."""
    if not resume:
        return False
    if records is not None:
        records.restore(out)
    return os.path.isfile(os.path.join(out, "results.json"))


def _start_afresh(out: str):
    """Empty ``out`` before a run trains into it from iteration 0. What an interrupted (or replaced)
    run left there would otherwise mix with the new run: Detectron2's ``metrics.json``, which its
    JSONWriter appends to (two curves in one file, two runs' evaluations in one record), and its
    ``model_best.pth``."""
    if os.path.isdir(out) and os.listdir(out):
        print(f"  {out}: an unfinished or replaced run's files removed; trained from the start", flush=True)
        shutil.rmtree(out)


def train_run(name: str, config: str, out: str, resume: bool, opts, flags=(), records=None) -> tuple:
    """One ``train_net.py`` run of ``config`` into ``out`` (skipped when resuming and finished),
    recorded in ``records`` when given (:func:`finished`).

    Returns:
        (its ``results.json`` results: {task: metrics}, minutes of the run, kept in
        ``wall_time.json`` for ``--resume``).
    """
    results, timing = os.path.join(out, "results.json"), os.path.join(out, "wall_time.json")
    if not finished(out, resume, records):
        _start_afresh(out)
        os.makedirs(out, exist_ok=True)
        minutes = run_tool("train_net.py", "--config-file", config, *flags, "OUTPUT_DIR", out, *opts,
                           log=os.path.join(out, "train_net.log")) / 60
        with open(timing, "w") as f:
            json.dump({"minutes": minutes}, f)
        print(f"  {name}: {minutes:.1f} min", flush=True)
        if records is not None:
            records.save(out, name=name)
    with open(results) as f:
        metrics = json.load(f)["results"]
    with open(timing) as f:
        return metrics, json.load(f)["minutes"]
