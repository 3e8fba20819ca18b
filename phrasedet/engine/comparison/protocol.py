"""What the retrieval and pointing comparisons (``tools/compare/compare_retrieval.py``,
``tools/compare/compare_pointing.py``) share: the image representations they compare on, the budget and
model-selection options of every run, and the learning curves drawn from them.

Two representations (docs/RETRIEVAL.md, docs/POINTING.md):

* ``cnn``: the built-in pretrained CNN (:mod:`..pretrained_cnn`), the stand-in for ImageNet
  weights, or weights the user names;
* ``oracle``: the oracle (:mod:`phrasedet.data.synthetic.oracle`), an upper bound computed from the
  scenes that separates "the loss fails" from "the CNN cannot see it".
"""
import os
from typing import Sequence

from ..model_selection import read_selection

__all__ = ["REPRESENTATIONS", "PLATEAU_TOLERANCE", "pretrained_cnn", "oracle_features", "common_oracle_features", "budget_opts",
           "selection_opts", "selected_weights", "draw_curves", "gaining_runs", "dataset_flags",
           "representation_records", "add_word_vectors_argument", "run_opts", "word_vectors_digest", "config_of",
           "word_vectors_line", "word_vectors_opts"]

REPRESENTATIONS = ("cnn", "oracle")
#: A curve has flattened where it never again gains more than this (rsum points) over its best so far.
PLATEAU_TOLERANCE = 5.0


def pretrained_cnn(arg: str) -> str:
    """The CNN of the ``cnn`` representation: ``arg`` when given, ``''`` for ``"none"`` (random
    initialization), else the built-in pretrained CNN (trained once into the cache)."""
    if arg == "none":
        return ""
    if arg:
        return arg
    from ..pretrained_cnn import ensure_builtin_cnn

    return ensure_builtin_cnn()


def oracle_features(root: str, resume: bool, grid: int = 16, language: str = "v3") -> dict:
    """The oracle's global features and maps of the built-in caption and pointing splits (those of
    ``language``; the scenes, so the features, are the same in every language) in
    ``<root>/features``: {"global": dir, "maps": dir} (kept by ``resume``)."""
    from phrasedet.data.datasets.builtin import builtin_dataset_root, builtin_name
    from phrasedet.data.synthetic.ground_truth import SPLITS, load_ground_truth
    from phrasedet.data.synthetic.oracle import write_oracle_features

    out = os.path.join(root, "features")
    dirs = {"global": os.path.join(out, "global"), "maps": os.path.join(out, "maps")}
    names = ([builtin_name(f"flickr30k_captions_{s}", language) for s in SPLITS]
             + [builtin_name(f"flickr30k_pointing_{s}", language) for s in ("val", "test")])
    done = all(os.path.isfile(os.path.join(d, f"{n}.npy")) for d in dirs.values() for n in names)
    if not (resume and done):
        write_oracle_features(out, names, grid, load_ground_truth(builtin_dataset_root()))
    return dirs


def common_oracle_features(root: str, resume: bool, language: str = "v3") -> str:
    """The oracle's global features without the columns that name few training images
    (:func:`~phrasedet.evaluation.retrieval.instance_fit.common_columns` of the training split: those
    nonzero in at most ``RARE_SUPPORT`` training images, unused ones included), for every caption
    split of ``language``, in ``<root>/features/common`` (kept by ``resume``). Returns the folder."""
    import numpy as np

    from phrasedet.data.datasets.builtin import builtin_name
    from phrasedet.data.image_features import features_path, write_image_features
    from phrasedet.data.synthetic.ground_truth import SPLITS
    from phrasedet.evaluation.retrieval.instance_fit import common_columns

    names = [builtin_name(f"flickr30k_captions_{s}", language) for s in SPLITS]
    out = os.path.join(root, "features", "common")
    if resume and all(os.path.isfile(features_path(out, n)) for n in names):
        return out
    full = oracle_features(root, resume, language=language)["global"]
    keep = common_columns(np.load(features_path(full, names[0])))
    for name in names:
        with open(features_path(full, name)[: -len(".npy")] + ".txt", encoding="utf-8") as f:
            ids = [line.rstrip("\n") for line in f]
        write_image_features(out, name, np.load(features_path(full, name))[:, keep], ids)
    return out


def representation_records(root: str, record_root: str, rep: str, weights: str, features_file: str,
                           word_vectors: str = ""):
    """The :class:`~phrasedet.engine.comparison.run_records.RunRecords` of one representation's runs in
    ``root``, kept under ``<record_root>/<rep>``; None without ``record_root``. They are keyed by
    the CNN's backbone (``weights``), or without a trained CNN (the oracle, a random CNN) by
    ``features_file`` (the training split's features or maps), and by ``word_vectors``
    (:func:`word_vectors_digest`)."""
    if not record_root:
        return None
    from .run_records import RunRecords, backbone_digest, file_digest
    from .runs import ROOT

    digest = backbone_digest(weights) if weights else file_digest(features_file)
    return RunRecords(root, os.path.join(record_root, rep), digest, ROOT, word_vectors=word_vectors)


def add_word_vectors_argument(parser) -> None:
    """``--word-vectors PATH``: the word vectors every run reads (a word2vec binary file, e.g. the
    project's ``results/word_vectors/builtin_word2vec.bin``); default: word2vec trained on this
    machine, whose vectors differ from another CPU's in their last bits (docs/TRAINING.md,
    "Determinism across machines")."""
    parser.add_argument("--word-vectors", default="", metavar="PATH",
                        help="a word2vec binary file every run reads (the project's: "
                             "results/word_vectors/builtin_word2vec.bin); default: word2vec trained here")


def word_vectors_opts(args) -> list:
    """The ``KEY VALUE`` overrides that make a run read ``--word-vectors`` (a word2vec binary
    file); none without it."""
    if not args.word_vectors:
        return []
    if not os.path.isfile(args.word_vectors):
        raise FileNotFoundError(f"--word-vectors: no file {args.word_vectors}")
    return ["PHRASEDET.TEXT.WORD_VECTORS", "file", "PHRASEDET.TEXT.WORD_VECTORS_PATH",
            os.path.abspath(args.word_vectors), "PHRASEDET.TEXT.WORD_VECTORS_FORMAT", "word2vec_binary"]


def run_opts(args, world=()) -> list:
    """The ``KEY VALUE`` overrides of every run of a comparison: ``world``'s (those that put the
    run in a built-in world, :mod:`.worlds`), those that make it read ``--word-vectors``, then the
    user's (a leading ``--`` dropped). Later keys win."""
    return [*world, *word_vectors_opts(args), *(args.opts[1:] if args.opts[:1] == ["--"] else args.opts)]


def word_vectors_digest(config: str, opts) -> str:
    """The fingerprint (:func:`~phrasedet.text.word_vectors.keyed_vectors_fingerprint`) of the word
    vectors the runs of ``config`` with ``opts`` read: loaded from a file, or trained (once, then
    cached) on this machine."""
    from phrasedet.text.build import build_word_vectors
    from phrasedet.text.word_vectors import keyed_vectors_fingerprint

    return keyed_vectors_fingerprint(build_word_vectors(config_of(config, opts)))


def word_vectors_line(args, config: str, opts, digest: str) -> str:
    """What a comparison prints of its word vectors: ``--word-vectors``, else the runs' source
    (``PHRASEDET.TEXT.WORD_VECTORS`` of ``config`` with ``opts``), and their fingerprint."""
    source = args.word_vectors or config_of(config, opts).PHRASEDET.TEXT.WORD_VECTORS
    return f"word vectors: {'word2vec trained here' if source == 'word2vec' else source} (fingerprint {digest})"


def config_of(config: str, opts=()):
    """The phrasedet config of the file ``config`` with the ``KEY VALUE`` overrides ``opts``."""
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(config)
    cfg.merge_from_list([str(o) for o in opts])
    return cfg


def dataset_flags(names) -> list:
    """``--dataset`` flags of ``tools/data/extract_image_features.py``, one per dataset name."""
    return [flag for n in names for flag in ("--dataset", n)]


def budget_opts(iterations: int) -> list:
    """``SOLVER`` overrides of a run of ``iterations`` with the learning rate divided at its middle
    (and a checkpoint only at its end)."""
    return ["SOLVER.MAX_ITER", int(iterations), "SOLVER.STEPS", f"({int(iterations) // 2},)",
            "SOLVER.CHECKPOINT_PERIOD", int(iterations)]


def selection_opts(dataset: str, period: int, metric: str = "retrieval/rsum") -> list:
    """``PHRASEDET.SELECTION`` overrides: validate on ``dataset`` every ``period`` iterations and test
    the best snapshot."""
    return ["PHRASEDET.SELECTION.DATASET", dataset, "PHRASEDET.SELECTION.PERIOD", int(period),
            "PHRASEDET.SELECTION.METRIC", metric]


def selected_weights(run_dir: str) -> str:
    """The model a run with selection tested (its ``selection.json``), else its last one.

    Raises:
        FileNotFoundError: naming the folder, when it has neither (the run is not trained yet).
    """
    record = read_selection(run_dir)
    if record is not None:
        return record["weights"] if os.path.isabs(record["weights"]) else os.path.join(run_dir, os.path.basename(record["weights"]))
    final = os.path.join(run_dir, "model_final.pth")
    if not os.path.isfile(final):
        raise FileNotFoundError(f"{run_dir} has no selection.json and no model_final.pth: train that run first "
                                "(list its model in --models)")
    return final


def _run_curve(run, key: str):
    """One run's validation curve of ``key``: a ``metrics.json``, or its phases' files joined
    (missing files skipped)."""
    from phrasedet.utils.learning_curves import join_phases, read_curve

    phases = [run] if isinstance(run, str) else list(run)
    return join_phases([read_curve(f, key) for f in phases if os.path.isfile(f)])


def gaining_runs(files: dict, labels: Sequence[str], key: str, tolerance: float) -> dict:
    """{model: [label of each run still gaining when its budget ended]} (models with none left
    out), for ``files`` as :func:`draw_curves` takes them and ``labels`` naming the runs of each
    model in order (e.g. ``["seed 0", "seed 1"]``); a run without a curve is not judged
    (:func:`~phrasedet.utils.learning_curves.still_gaining`)."""
    from phrasedet.utils.learning_curves import still_gaining

    out = {}
    for model, runs in files.items():
        gaining = [label for label, run in zip(labels, runs) if still_gaining(_run_curve(run, key), tolerance)]
        if gaining:
            out[model] = gaining
    return out


def draw_curves(files: dict, path: str, title: str, key: str = "retrieval/rsum", tolerance: float = PLATEAU_TOLERANCE,
                ylabel: str = "validation rsum") -> str:
    """Read each run's validation curve of ``key`` ({model: [run, ...]}, a run being a
    ``metrics.json`` or the list of its phases' files, joined by
    :func:`~phrasedet.utils.learning_curves.join_phases`; missing files skipped), draw them into
    ``path`` and return the table of where each flattened (within ``tolerance``)."""
    from phrasedet.utils.learning_curves import format_plateaus, plot_curves

    curves = {model: [c for c in (_run_curve(r, key) for r in runs) if c] for model, runs in files.items()}
    curves = {m: c for m, c in curves.items() if c}
    if not curves:
        return "(no validation curves: no run trained with model selection)"
    plot_curves(curves, path, title, ylabel)
    return f"Validation curves drawn in {path}:\n\n" + format_plateaus(curves, tolerance)
