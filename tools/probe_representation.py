#!/usr/bin/env python
"""How well frozen image representations of the built-in dataset see what its captions state:
a linear probe per kind of fact (docs/DATA.md, "Probing an image representation").

    python tools/probe_representation.py [--features NAME=DIR ...] [--weights NAME=CHECKPOINT ...]
        [--oracle] [--config-file configs/retrieval/vsepp.yaml] [--output-dir output/probe] [KEY VALUE ...]

Each representation is the pooled features of the built-in training (600) and test (150) images:

* ``--features NAME=DIR``: a features folder (``tools/extract_image_features.py``'s layout;
  maps files are average-pooled);
* ``--weights NAME=CHECKPOINT``: the config's image encoder with the backbone of CHECKPOINT
  (``MODEL.RETRIEVAL.BACKBONE_WEIGHTS``: a detector, the built-in pretrained CNN, ...), its
  features extracted into ``<output-dir>/NAME`` first (``KEY VALUE`` overrides apply);
* ``--oracle``: the oracle's global form (tools/make_oracle_features.py).

For every binary fact (background, colour, shape, colour + shape, count, colour or shape at a
position) a logistic regression is fitted on the training features and scored on the test
images; the table gives the mean test AUC per group, one column per representation
(phrasedet/evaluation/representation_probe.py), and ``<output-dir>/probe.json`` every label's AUC.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

import phrasedet  # noqa: E402,F401  (registers the datasets)
from phrasedet.data.datasets.builtin import builtin_dataset_root  # noqa: E402
from phrasedet.data.synthetic.ground_truth import load_ground_truth  # noqa: E402
from phrasedet.evaluation.representation_probe import TEST_SPLIT, TRAIN_SPLIT, format_probe, probe_features_dir  # noqa: E402


def _named(values, flag):
    out = []
    for v in values or ():
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"{flag} takes NAME=PATH, got {v!r}")
        out.append((name, path))
    return out


def extract(name, weights, config, output_dir, opts):
    """Features of the config's image encoder with ``weights``' backbone, into ``<output_dir>/<name>``."""
    out = os.path.join(output_dir, name)
    cmd = [sys.executable, os.path.join(ROOT, "tools", "extract_image_features.py"), "--config-file", config, "--output-dir", out,
           "--dataset", TRAIN_SPLIT, "--dataset", TEST_SPLIT, "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", weights, *opts]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"extracting the features of {name} failed:\n{proc.stderr[-3000:]}")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--features", action="append", help="NAME=DIR: a features folder")
    p.add_argument("--weights", action="append", help="NAME=CHECKPOINT: extract with this backbone, then probe")
    p.add_argument("--oracle", action="store_true", help="probe the oracle representation too")
    p.add_argument("--config-file", default=os.path.join(ROOT, "configs", "retrieval", "vsepp.yaml"),
                   help="the image encoder of --weights (its input size, backbone feature and pooling)")
    p.add_argument("--output-dir", default=os.path.join(ROOT, "output", "probe"))
    p.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE overrides of --config-file")
    args = p.parse_args(argv)
    sources = _named(args.features, "--features")
    sources += [(n, extract(n, w, args.config_file, args.output_dir, args.opts)) for n, w in _named(args.weights, "--weights")]
    images = load_ground_truth(builtin_dataset_root())
    if args.oracle:
        from phrasedet.data.synthetic.oracle import write_oracle_features

        oracle = os.path.join(args.output_dir, "oracle")
        sources.append(("oracle", write_oracle_features(oracle, [TRAIN_SPLIT, TEST_SPLIT], 8, images)["global"]))
    if not sources:
        raise SystemExit("nothing to probe: give --features, --weights or --oracle")
    columns = {name: probe_features_dir(path, images) for name, path in sources}
    print("Linear probe, built-in training images -> test images: mean test AUC per fact group (0.5 = chance)\n")
    print(format_probe({name: probe["groups"] for name, probe in columns.items()}))
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, "probe.json"), "w") as f:
        json.dump({"sources": dict(sources), "probes": columns}, f, indent=1)


if __name__ == "__main__":
    main()
