"""Staged training in one command: the shared stage mechanism (:mod:`.stages`, :mod:`.model_surgery`),
paper 003's recipe (:mod:`.recipe`, with its CCA-vs-random comparison :mod:`.init_comparison` and
:mod:`.baseline_process`), paper 001's two stages (:mod:`.retrieval_stages`) and single runs that
keep their best validation model (:mod:`.selected_training`)."""
