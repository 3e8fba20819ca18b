# Two entry points, each doing all set-up on a fresh machine (tools/bootstrap.sh):
#   make demo   the main job on the built-in dataset
#   make test   the test suite (what CI runs)
#   make mutation  mutation testing of the modules behind published numbers (not in CI; hours)
# A second run with nothing changed skips every install.
.PHONY: demo test bench mutation

demo:
	@PY="$$(bash tools/bootstrap.sh | tail -n 1)" && "$$PY" tools/train_net.py --config-file configs/cite_cca.yaml

test:
	@PY="$$(bash tools/bootstrap.sh | tail -n 1)" && "$$PY" -m pytest -q -n auto tests

mutation:
	@PY="$$(bash tools/bootstrap.sh | tail -n 1)" && "$$PY" tools/mutation.py
