# Two entry points, each doing all set-up on a fresh machine (tools/setup/bootstrap.sh):
#   make demo   the main job on the built-in dataset
#   make test   the test suite (what CI runs)
#   make mutation  mutation testing of the modules behind published numbers (not in CI; hours)
# A second run with nothing changed skips every install.
.PHONY: demo test bench mutation

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
