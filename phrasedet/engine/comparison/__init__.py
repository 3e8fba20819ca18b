"""The comparison protocol shared by every family's ``tools/compare/compare_*.py``: the representations
and run options (:mod:`.protocol`), runs in processes of their own (:mod:`.runs`,
:mod:`.tool_process`), their records in the repository (:mod:`.run_records`) and the verdicts
on each paper's claims (:mod:`.claims` and one module per family)."""
