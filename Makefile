# Two entry points, each doing all set-up on a fresh machine (tools/setup/bootstrap.sh):
#   make demo   the main job on the built-in dataset
#   make test   the test suite (what CI runs)
#   make mutation  mutation testing of the modules behind published numbers (not in CI; hours)
# A second run with nothing changed skips every install.
.PHONY: demo test bench mutation

# Keep compiled bytecode (.venv and the tree's __pycache__/, git-ignored) even where the environment
# says not to write it: bootstrap installs without byte-compiling, and a run that may not write
# .pyc files compiles torch, Detectron2 and phrasedet again in every process (11 s instead of 6 s
# to import them here), and the tests start hundreds of processes.
unexport PYTHONDONTWRITEBYTECODE

# make demo: the recipe with stage 3 cut to a preview (configs/cite_cca_preview.yaml: the converged protocol does not
# fit in 15 minutes on 2 cores), then the converged comparison's CITE tables and verdict from results/ (seconds).
demo:
	@PY="$$(bash tools/setup/bootstrap.sh | tail -n 1)" && "$$PY" tools/train_net.py --config-file configs/cite_cca_preview.yaml && \
	"$$PY" tools/compare/compare_recipes.py --records-only --record-root results/phrase_detection_compare \
	--word-vectors results/word_vectors/builtin_word2vec.bin --detectors 0 1 --filter-weights none --models cite_cca cite \
	--output-root output/cite_cca_preview/converged

test:
	@PY="$$(bash tools/setup/bootstrap.sh | tail -n 1)" && "$$PY" -m pytest -q -n auto --dist worksteal tests

mutation:
	@PY="$$(bash tools/setup/bootstrap.sh | tail -n 1)" && "$$PY" tools/testing/mutation.py
