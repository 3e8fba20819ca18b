"""Records of finished comparison runs, kept in the repository so that a comparison longer than one
machine's life goes on across machines (``tools/compare/compare_retrieval.py --record-root``,
``tools/compare/compare_pointing.py --record-root``; docs/RETRIEVAL.md, "Running the comparisons").

A run's *record* is the small part of its output folder: every JSON file of it (``results.json``,
``wall_time.json``, ``selection.json``, the pointing game's results, ...), with each ``metrics.json``
cut to its evaluation records (the validation curve; the training-loss lines are dropped), and a
``record.json`` saying which code (``dirty``: the package, tools or configs differed from the
commit), machine and image representation made it::

    {"commit": "<git HEAD>", "dirty": false, "machine": "<CPU>, 1 threads",
     "representation": "<sha256 of the CNN's backbone tensors, or of the oracle's features>",
     "word_vectors": "<fingerprint of the word vectors the run read>", ...}

The weights are not kept. ``--resume`` restores a run from its record when the output folder does
not hold it and the record was made on the same image representation (the same digest) with the
same word vectors; a record of another representation or other word vectors is ignored, and the
run trains again. Word vectors are keyed by their values: word2vec trained on another CPU differs
in its last bits (OpenBLAS picks other kernels), which is why the project's commands read the
vectors kept in ``results/word_vectors/``. The CNN is keyed by its weights,
not by the features computed from them: another machine's kernels change the features' last bits
(docs/TRAINING.md, "Determinism across machines") but not the CNN, which the project keeps in
``results/builtin_cnn/`` (:func:`save_backbone`) so that every machine starts from it. A run that needs a recorded run's
weights (a fine-tuned row continues its frozen row) trains that run again first.
"""
import hashlib
import json
import logging
import os
import shutil
import subprocess
from typing import Optional

from phrasedet.engine.model_selection import read_selection
from phrasedet.fileio import load_json_file

__all__ = ["RECORD_FILE", "RUN_FILES", "STARTED", "RunRecords", "backbone_digest", "drop_leftovers", "file_digest",
           "format_records", "keep_evaluations", "model_digest", "read_records", "save_backbone", "save_model"]

logger = logging.getLogger("phrasedet.engine")

RECORD_FILE = "record.json"
_MAX_BYTES = 1 << 20  # a JSON file bigger than this is not a summary: never recorded (logged)
CODE_FOLDERS = ("phrasedet", "tools", "configs")


def file_digest(path: str) -> str:
    """The sha256 of a file, hex (read in blocks: features files are tens of MB)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _tensors_digest(tensors: dict) -> str:
    """The sha256 of named tensors (``{name: Tensor}``, as :func:`~phrasedet.modeling.checkpoint.read_checkpoint`
    gives every file's, a ``.pkl``'s numpy arrays included): names, dtypes, shapes and bytes, in name order."""
    import numpy as np

    h = hashlib.sha256()
    for name, tensor in sorted(tensors.items()):
        array = np.ascontiguousarray(tensor.detach().cpu().numpy())
        h.update(f"{name}:{array.dtype}:{array.shape};".encode())
        h.update(array.tobytes())
    return h.hexdigest()


def backbone_digest(path: str) -> str:
    """The sha256 of a weights file's backbone: its tensors' names, dtypes, shapes and bytes in name
    order, so the same CNN saved in another file (a whole model's checkpoint, :func:`save_backbone`'s
    copy) has the same digest."""
    from phrasedet.modeling.checkpoint import backbone_tensors, read_checkpoint

    return _tensors_digest(backbone_tensors(read_checkpoint(path)["model"], path))


def model_digest(path: str) -> str:
    """The sha256 of every tensor of a checkpoint's model (a stage-1 detector: the representation
    of the phrase-detection runs), as :func:`backbone_digest` hashes a backbone."""
    from phrasedet.modeling.checkpoint import read_checkpoint

    return _tensors_digest(read_checkpoint(path)["model"])


def save_model(src: str, dst: str) -> str:
    """Write the model tensors of the checkpoint ``src`` to ``dst`` as ``{"model": ...}`` (the
    optimizer's state and the iteration left out). Returns :func:`model_digest` of ``dst``."""
    import torch

    from phrasedet.modeling.checkpoint import read_checkpoint

    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    model = read_checkpoint(src)["model"]
    torch.save({"model": {k: torch.as_tensor(v).clone() for k, v in sorted(model.items())}}, dst)
    return model_digest(dst)


def save_backbone(src: str, dst: str) -> str:
    """Write the backbone tensors of the weights file ``src`` to ``dst`` as a checkpoint
    ``{"model": {"backbone.<name>": tensor}}`` that ``MODEL.RETRIEVAL.BACKBONE_WEIGHTS`` loads (the
    optimizer's state and any head left out). Returns :func:`backbone_digest` of ``dst``."""
    import torch

    from phrasedet.modeling.checkpoint import backbone_tensors, read_checkpoint

    tensors = backbone_tensors(read_checkpoint(src)["model"], src)
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    torch.save({"model": {f"backbone.{k}": torch.as_tensor(v).clone() for k, v in sorted(tensors.items())}}, dst)
    return backbone_digest(dst)


def keep_evaluations(lines) -> list:
    """The lines of a Detectron2 ``metrics.json`` that hold an evaluation result (a key with a ``/``,
    as ``retrieval/rsum``); the training statistics (``total_loss``, ``lr``, ``time``, ...) go."""
    return [line for line in lines if line.strip() and any("/" in k for k in json.loads(line))]


def _git_state(root: str) -> dict:
    def git(*args):
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True).stdout.strip()

    # "dirty": the code that runs (the package, the tools, the configs) differs from the commit
    changed = git("status", "--porcelain", "--untracked-files=no", "--", *CODE_FOLDERS)
    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(changed)}


def _machine(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU model (``cpuinfo``'s first "model name") and the thread count torch uses (runs on
    other machines round differently: docs/TRAINING.md, "Determinism across machines")."""
    import torch

    model = "unknown CPU"
    if os.path.isfile(cpuinfo):
        with open(cpuinfo) as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    return f"{model}, {torch.get_num_threads()} threads"


class RunRecords:
    """The records of the runs under ``output_root`` on one image representation, mirrored under
    ``record_root``: the run in ``<output_root>/seed0/vsepp`` is recorded in
    ``<record_root>/seed0/vsepp``.

    Args:
        output_root: the output folder of the representation's runs.
        record_root: where their records go (a folder of the repository).
        representation: the digest of the image representation the runs train on: the CNN's
            (:func:`backbone_digest`), or the oracle's features file's (:func:`file_digest`).
        code_root: the git checkout whose commit each record names.
        word_vectors: the fingerprint of the word vectors the runs read
            (:func:`phrasedet.engine.comparison.protocol.word_vectors_digest`).
    """

    def __init__(self, output_root: str, record_root: str, representation: str, code_root: str,
                 word_vectors: str = ""):
        self.output_root, self.record_root = os.path.abspath(output_root), os.path.abspath(record_root)
        self.representation, self.code_root, self.word_vectors = representation, code_root, word_vectors

    def path(self, out: str) -> str:
        """The record folder of the run in ``out`` (a folder under ``output_root``)."""
        rel = os.path.relpath(os.path.abspath(out), self.output_root)
        if rel.startswith(os.pardir) or rel == os.curdir:  # the folder itself holds every record: never a run's
            raise ValueError(f"{out} is not under the comparison's output folder {self.output_root}")
        return os.path.join(self.record_root, rel)

    def save(self, out: str, **meta) -> str:
        """Record the finished run in ``out``, with ``meta`` in its ``record.json``. Over an older
        record (a run trained again) the older record's files go first, but the records of runs
        nested in it stay: a file only the older run had (the ``presence_oracle.json`` written
        beside a record) would pass for the new run's. Returns the record folder."""
        dest = self.path(out)
        _clear(dest, (RECORD_FILE,))  # an older record's files that this run did not write (its presence_oracle.json, say)
        for folder, _, files in os.walk(out):
            for name in sorted(f for f in files if f.endswith(".json") and f != RECORD_FILE):
                src = os.path.join(folder, name)
                if os.path.getsize(src) > _MAX_BYTES and name != "metrics.json":
                    logger.info("%s: %d bytes, not a summary: left out of the record", src, os.path.getsize(src))
                    continue
                target = os.path.join(dest, os.path.relpath(src, out))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                if name == "metrics.json":
                    with open(src, encoding="utf-8") as f:
                        kept = keep_evaluations(f)
                    with open(target, "w", encoding="utf-8") as f:
                        f.writelines(line if line.endswith("\n") else line + "\n" for line in kept)
                else:
                    shutil.copyfile(src, target)
        with open(os.path.join(dest, RECORD_FILE), "w", encoding="utf-8") as f:
            json.dump({**_git_state(self.code_root), "machine": _machine(), "representation": self.representation,
                       "word_vectors": self.word_vectors, **meta}, f, indent=1)
        return dest

    def read(self, out: str) -> Optional[dict]:
        """The ``record.json`` of the run in ``out``, None when it has no record."""
        path = os.path.join(self.path(out), RECORD_FILE)
        if not os.path.isfile(path):
            return None
        return load_json_file(path)

    def restore(self, out: str) -> bool:
        """Copy the record of ``out`` into it when it holds no finished run and the record was made
        on this representation with these word vectors. Returns whether the run is restored."""
        record = self.read(out)
        if record is None or os.path.isfile(os.path.join(out, "results.json")):
            return False
        if record.get("representation") != self.representation:
            logger.warning("%s: recorded on another image representation (%s, now %s): trained again", self.path(out),
                           str(record.get("representation"))[:12], self.representation[:12])
            return False
        if record.get("word_vectors", "") != self.word_vectors:
            logger.warning("%s: recorded with other word vectors (%s, now %s): trained again", self.path(out),
                           str(record.get("word_vectors", ""))[:12] or "none named", self.word_vectors[:12])
            return False
        drop_leftovers(out)
        shutil.copytree(self.path(out), out, dirs_exist_ok=True)
        return True


def _clear(folder: str, marks) -> list:
    """Remove everything in ``folder`` but its sub-folders with one of the files ``marks`` at their
    top (runs or records of their own, nested in it). Returns the names removed."""
    if not os.path.isdir(folder):
        return []
    dropped = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            if any(os.path.isfile(os.path.join(path, f)) for f in marks):
                continue
            shutil.rmtree(path)
        else:
            os.remove(path)
        dropped.append(name)
    return dropped


#: The command that started a run, written into its folder by ``runs.train_run``.
STARTED = "run_started.json"
#: The files at the top of a folder that make it a run of its own (``runs.train_run`` writes both).
RUN_FILES = ("results.json", STARTED)


def drop_leftovers(out: str) -> None:
    """Remove from ``out`` what an unfinished run left there before a record is restored into it:
    the record is another, finished run, and the leftovers (checkpoints, a ``model_best.pth``,
    Detectron2's appended ``metrics.json``) would pass for its files. A run interrupted while it
    replaced its record left such a folder, and a later evaluation took that run's ``model_best.pth``
    of iteration 599 for the record's model (the long-tailed world's detector 1, seed 1). Sub-folders
    that hold a run of their own (:data:`RUN_FILES` at their top, e.g. ``stage1_eval``) stay."""
    dropped = _clear(out, RUN_FILES)
    if dropped:
        logger.warning("%s: an unfinished run's files removed before its record was restored: %s", out, ", ".join(dropped))


#: The columns of :func:`format_records`: (header, metric key found anywhere in a run's results).
RECORD_COLUMNS = (("rsum", "rsum"), ("i2t R@1", "i2t_R@1"), ("t2i R@1", "t2i_R@1"), ("pointing", "accuracy"),
                  ("centre", "centre_accuracy"), ("mAP", "mAP"), ("loc. acc.", "loc_acc"))


def _find(results, key):
    """The first value of ``key`` in the nested dicts of ``results`` (depth first, in order), or None."""
    if isinstance(results, dict):
        if key in results and not isinstance(results[key], dict):
            return results[key]
        for value in results.values():
            found = _find(value, key)
            if found is not None:
                return found
    return None


def _selected(folder: str) -> Optional[dict]:
    """The selection of a recorded run: its own ``selection.json``, else its last stage's."""
    stages = sorted((os.path.join(folder, d) for d in os.listdir(folder)), reverse=True)
    for stage in [folder] + [d for d in stages if os.path.isdir(d)]:
        record = read_selection(stage)
        if record is not None:
            return record
    return None


def read_records(record_root: str) -> list:
    """Every run recorded under ``record_root``, in path order: dicts with ``run`` (its folder
    relative to ``record_root``: ``<rep>/seed<k>/<model>[/<part>]``), ``record`` (its
    ``record.json``), ``results`` (its ``results.json``'s results), ``minutes`` and ``selection``
    (None when it has none).

    Raises:
        FileNotFoundError: naming the file, when a record lacks its ``results.json``.
        BadFileError: naming the file and line of a file that is not JSON, or of a damaged
            ``selection.json``.
    """
    runs = []
    for folder, _, files in sorted(os.walk(record_root)):
        if RECORD_FILE not in files:
            continue
        results = os.path.join(folder, "results.json")
        if not os.path.isfile(results):
            raise FileNotFoundError(f"{folder}: a record without results.json")
        timing = os.path.join(folder, "wall_time.json")
        runs.append({"run": os.path.relpath(folder, record_root), "record": load_json_file(os.path.join(folder, RECORD_FILE)),
                     "results": load_json_file(results)["results"], "selection": _selected(folder),
                     "minutes": load_json_file(timing)["minutes"] if os.path.isfile(timing) else None})
    return runs


def format_records(runs: list) -> str:
    """A markdown table of :func:`read_records`' runs: the headline metrics each has, the best
    validation iteration, minutes, commit and machine ("-" where a run has no such value)."""
    columns = [(h, k) for h, k in RECORD_COLUMNS if any(_find(r["results"], k) is not None for r in runs)]
    head = ["run"] + [h for h, _ in columns] + ["best validation", "minutes", "commit", "machine"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in runs:
        values = [_find(r["results"], k) for _, k in columns]
        cells = [f"{v:.1f}" if v is not None else "-" for v in values]
        sel = r["selection"]
        cells.append(f"{sel.get('stage', '')} {sel['iteration']}".strip() if sel else "-")
        cells.append(f"{r['minutes']:.1f}" if r["minutes"] is not None else "-")
        record = r["record"]
        cells.append(str(record.get("commit") or "-")[:7] + (" (modified)" if record.get("dirty") else ""))
        cells.append(str(record.get("machine", "-")))
        lines.append(f"| {r['run']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
