#!/usr/bin/env python
"""How well frozen image representations of the built-in dataset see what its captions state:
a linear probe per kind of fact (docs/DATA.md, "Probing an image representation"); or, with
``--detector``, how well a phrase detector's region features see each object's facts
(docs/DATA.md, "Probing a detector's regions").

    python tools/evaluation/probe_representation.py [--features NAME=DIR ...] [--weights NAME=CHECKPOINT ...]
        [--oracle] [--config-file configs/retrieval/vsepp.yaml] [--output-dir output/probe] [KEY VALUE ...]
    python tools/evaluation/probe_representation.py --detector NAME=CHECKPOINT [--detector NAME2=CHECKPOINT2 ...]
        [--config-file configs/cite_cca.yaml] [--output-dir output/probe] [KEY VALUE ...]

Each representation is the pooled features of the built-in training (600) and test (150) images:

* ``--features NAME=DIR``: a features folder (``tools/data/extract_image_features.py``'s layout;
  maps files are average-pooled);
* ``--weights NAME=CHECKPOINT``: the config's image encoder with the backbone of CHECKPOINT
  (``MODEL.RETRIEVAL.BACKBONE_WEIGHTS``: a detector, the built-in pretrained CNN, ...), its
  features extracted into ``<output-dir>/NAME`` first (``KEY VALUE`` overrides apply);
* ``--oracle``: the oracle's global form (tools/data/make_oracle_features.py).

For every binary fact (background, colour, shape, colour + shape, count, colour or shape at a
position) a logistic regression is fitted on the training features and scored on the test
images; the table gives the mean test AUC per group, one column per representation
(phrasedet/evaluation/representation_probe.py), and ``<output-dir>/probe.json`` every label's AUC.

``--detector NAME=CHECKPOINT`` (a ``PhraseRCNN`` checkpoint, e.g. ``make demo``'s
``output/cite_cca/stage1_detector/model_final.pth``) probes regions instead
(phrasedet/evaluation/region_probe.py): the model of ``--config-file`` (``KEY VALUE`` overrides
apply) with the checkpoint's backbone and region-feature head (the file must hold every tensor of
them, in the config's shapes), in eval mode, gives each ground-truth object of the built-in
training and test images the region feature its region classifiers see for the object's box
(pooled ROI feature and 5-d box geometry); a logistic regression per object fact (colour, shape,
size, colour + shape) is fitted on the training objects and scored on the test objects. The table
gives the mean test AUC per group, one column per detector, and ``<output-dir>/probe_regions.json``
every label's AUC. ``--detector`` does not mix with the image flags.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

import phrasedet  # noqa: E402,F401  (registers the datasets)
from phrasedet.data.datasets.builtin import builtin_dataset_root  # noqa: E402
from phrasedet.data.synthetic.ground_truth import load_ground_truth  # noqa: E402
from phrasedet.evaluation.representation_probe import TEST_SPLIT, TRAIN_SPLIT, format_probe, probe_features_dir  # noqa: E402
from phrasedet.engine.comparison.tool_process import tool_path  # noqa: E402
from phrasedet.utils.named_paths import named_paths  # noqa: E402

IMAGE_CONFIG = os.path.join(ROOT, "configs", "retrieval", "vsepp.yaml")
DETECTOR_CONFIG = os.path.join(ROOT, "configs", "cite_cca.yaml")


def extract(name, weights, config, output_dir, opts):
    """Features of the config's image encoder with ``weights``' backbone, into ``<output_dir>/<name>``."""
    out = os.path.join(output_dir, name)
    cmd = [sys.executable, tool_path("extract_image_features.py"), "--config-file", config, "--output-dir", out,
           "--dataset", TRAIN_SPLIT, "--dataset", TEST_SPLIT, "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", weights, *opts]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"extracting the features of {name} failed:\n{proc.stderr[-3000:]}")
    return out


def detector_model(config_file, opts, checkpoint):
    """(cfg, model): the ``PhraseRCNN`` of ``config_file`` + ``opts`` with the backbone and region-feature
    head of ``checkpoint``, in eval mode. Raises ``FileNotFoundError`` or ``BadFileError`` naming the file."""
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config
    from phrasedet.engine.staged.model_surgery import load_weights
    from phrasedet.engine.trainer import PhrasedetTrainer
    from phrasedet.evaluation.region_probe import REGION_PARTS

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(config_file)
    cfg.merge_from_list(list(opts))
    cfg.freeze()
    model = PhrasedetTrainer.build_model(cfg)
    load_weights(model, checkpoint, keep=REGION_PARTS)
    return cfg, model.eval()


def probe_detectors(detectors, config_file, opts, output_dir):
    """Print the region table of ``detectors`` [(name, checkpoint)] and write ``<output_dir>/probe_regions.json``."""
    from phrasedet.data import PhraseDatasetMapper
    from phrasedet.evaluation.region_probe import probe_detector_regions
    from phrasedet.fileio import BadFileError

    for name, path in detectors:
        if not os.path.isfile(path):  # before building anything
            raise SystemExit(f"--detector {name}: checkpoint {path!r} does not exist")
    images = load_ground_truth(builtin_dataset_root())
    columns = {}
    for name, path in detectors:
        try:
            cfg, model = detector_model(config_file, opts, path)
        except (FileNotFoundError, BadFileError) as e:
            raise SystemExit(f"--detector {name}: {e}") from None
        columns[name] = probe_detector_regions(model, PhraseDatasetMapper(cfg, is_train=False), images)
    counts = next(iter(columns.values()))["objects"]
    print(f"Linear probe of region features, built-in training objects ({counts['train']}) -> test objects "
          f"({counts['test']}): mean test AUC per fact group (0.5 = chance)\n")
    print(format_probe({name: probe["groups"] for name, probe in columns.items()}))
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, "probe_regions.json"), "w") as f:
        json.dump({"detectors": dict(detectors), "config_file": config_file, "opts": list(opts), "probes": columns}, f, indent=1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--features", action="append", help="NAME=DIR: a features folder")
    p.add_argument("--weights", action="append", help="NAME=CHECKPOINT: extract with this backbone, then probe")
    p.add_argument("--oracle", action="store_true", help="probe the oracle representation too")
    p.add_argument("--detector", action="append", help="NAME=CHECKPOINT: probe this phrase detector's region features")
    p.add_argument("--config-file", default=None,
                   help="the image encoder of --weights (its input size, backbone feature and pooling; default "
                        "configs/retrieval/vsepp.yaml), or the PhraseRCNN of --detector (default configs/cite_cca.yaml)")
    p.add_argument("--output-dir", default=os.path.join(ROOT, "output", "probe"))
    p.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE overrides of --config-file")
    args = p.parse_args(argv)
    if args.detector:
        if args.features or args.weights or args.oracle:
            raise SystemExit("--detector probes regions, --features, --weights and --oracle probe images: run them apart")
        return probe_detectors(named_paths(args.detector, "--detector"), args.config_file or DETECTOR_CONFIG, args.opts,
                               args.output_dir)
    args.config_file = args.config_file or IMAGE_CONFIG
    sources = named_paths(args.features, "--features")
    sources += [(n, extract(n, w, args.config_file, args.output_dir, args.opts)) for n, w in named_paths(args.weights, "--weights")]
    images = load_ground_truth(builtin_dataset_root())
    if args.oracle:
        from phrasedet.data.synthetic.oracle import write_oracle_features

        oracle = os.path.join(args.output_dir, "oracle")
        sources.append(("oracle", write_oracle_features(oracle, [TRAIN_SPLIT, TEST_SPLIT], 8, images)["global"]))
    if not sources:
        raise SystemExit("nothing to probe: give --features, --weights, --oracle or --detector")
    columns = {name: probe_features_dir(path, images) for name, path in sources}
    print("Linear probe, built-in training images -> test images: mean test AUC per fact group (0.5 = chance)\n")
    print(format_probe({name: probe["groups"] for name, probe in columns.items()}))
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, "probe.json"), "w") as f:
        json.dump({"sources": dict(sources), "probes": columns}, f, indent=1)


if __name__ == "__main__":
    main()
