#!/usr/bin/env bash
# Creates or reuses the Python environment phrasedet runs in, installing only what is missing.
#
#   bash tools/setup/bootstrap.sh        # prints the path of the environment's python on its last line
#
# Environment used, in order:
#   1. $PHRASEDET_PYTHON, if set (a python interpreter you manage yourself);
#   2. the active virtual environment ($VIRTUAL_ENV), if any;
#   3. ./.venv, created with --system-site-packages so that a torch or detectron2 you already
#      installed system-wide is seen and kept.
# torch/torchvision are installed only if `import torchvision` fails; detectron2 only if
# `import detectron2` fails (your own detectron2 always wins). A stamp file records the hash of
# setup.py: a second run with nothing changed installs nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { echo "[bootstrap] ${SECONDS}s: $*" >&2; }

if [ -n "${PHRASEDET_PYTHON:-}" ]; then
  PY="$PHRASEDET_PYTHON"
elif [ -n "${VIRTUAL_ENV:-}" ]; then
  PY="$VIRTUAL_ENV/bin/python"
else
  if [ ! -x .venv/bin/python ]; then
    log "creating .venv (python3 -m venv --system-site-packages)"
    python3 -m venv --system-site-packages .venv
  fi
  PY="$PWD/.venv/bin/python"
fi

stamp_dir="$("$PY" -c 'import sys; print(sys.prefix)')"
stamp="$stamp_dir/.phrasedet-bootstrap"
want="$(cat setup.py tools/setup/bootstrap.sh | sha256sum | cut -c1-16) $PWD"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && "$PY" -c 'import torchvision, detectron2, phrasedet' 2>/dev/null; then
  log "environment up to date ($PY)"
  echo "$PY"; exit 0
fi

trap 'log "FAILED (line $LINENO, exit $?): set-up did not finish; see the messages above"' ERR

# pip's output on success, with its known false alarm about sal-detectron2's pins rewritten
# (tools/setup/pip_report.awk says why).
report_pip() { awk -f tools/setup/pip_report.awk >&2; }

# --no-compile: pip would byte-compile every module of every package (torch alone has thousands);
# Python compiles the few a run imports on first import instead, and caches them as usual.
pip_install() {
  local out rc=0
  out="$("$PY" -m pip install --disable-pip-version-check --no-compile -q "$@" 2>&1)" || rc=$?
  if [ "$rc" -ne 0 ]; then
    printf '%s\n' "$out" >&2
    log "FAILED: pip install $* exited with $rc (messages above)"
    exit "$rc"
  fi
  [ -z "$out" ] || printf '%s\n' "$out" | report_pip
}

if ! "$PY" -c 'import torch, torchvision' 2>/dev/null; then
  log "installing torch==2.14.1 torchvision==0.29.1"
  pip_install torch==2.14.1 torchvision==0.29.1
else
  log "using installed torch $("$PY" -c 'import torch; print(torch.__version__)')"
fi

if ! "$PY" -c 'import detectron2' 2>/dev/null; then
  # detectron2 is not on PyPI under its own name. sal-detectron2 0.7.2 repackages upstream
  # detectron2's Python tree (commit a59f0563); its wheel is cp310-only, so it is unpacked
  # without its compiled _C, which Faster R-CNN with torchvision's ROIAlign/NMS does not need.
  log "detectron2 not importable: installing the pure-Python tree of sal-detectron2==0.7.2"
  site="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  pip_install --no-deps --only-binary=:all: --python-version 3.10 --target "$site" --upgrade sal-detectron2==0.7.2
  pip_install 'fvcore<0.1.6' 'iopath<0.1.10' pycocotools yacs tabulate termcolor cloudpickle tqdm \
    tensorboard 'omegaconf>=2.1,<2.4' hydra-core matplotlib black 'setuptools<81'
else
  log "using installed detectron2 from $("$PY" -c 'import detectron2, os; print(os.path.dirname(detectron2.__file__))')"
fi

# WordNet for positive phrase augmentation (INPUT.PHRASES.PPA) and its test: Debian's database,
# read by nltk (phrasedet/text/wordnet.py). Installed where apt-get can (root); elsewhere the
# test that needs it is skipped and says so.
if [ ! -f /usr/share/wordnet/index.sense ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    log "installing Debian's WordNet database (wordnet-base wordnet-sense-index)"
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q wordnet-base wordnet-sense-index; } >/dev/null 2>&1 \
      || log "note: apt-get could not install WordNet; INPUT.PHRASES.PPA and its test need it (docs/INSTALL.md)"
  else
    log "note: no WordNet database (apt-get install wordnet-base wordnet-sense-index); INPUT.PHRASES.PPA and its test need it"
  fi
fi

log "installing phrasedet (editable) with its test extras"
# Built with the environment's own setuptools where it can build editable installs (64 or newer):
# an isolated build environment would install setuptools again first.
isolation=()
if "$PY" -c 'import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 64)' 2>/dev/null; then
  isolation=(--no-build-isolation)
fi
pip_install ${isolation[@]+"${isolation[@]}"} -e '.[test]'
"$PY" -c 'import torchvision, detectron2, phrasedet'
echo "$want" > "$stamp"
echo "$PY"
