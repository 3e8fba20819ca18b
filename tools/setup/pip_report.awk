# Rewrites pip's output after a successful install (tools/setup/bootstrap.sh), so that set-up prints
# nothing that reads as a failure when it succeeded:
# - sal-detectron2's metadata pins versions (e.g. numpy<2) that phrasedet does not need: it uses
#   only sal-detectron2's pure-Python detectron2 tree, which runs with the installed versions (the
#   test suite covers it). pip then prints "ERROR: pip's dependency resolver ..." and one
#   "sal-detectron2 ... requires ..., but you have ..." line per pin: these become one note.
# - a conflict of any other package is kept, as a warning.
# Everything else passes unchanged.
/^ERROR: pip.s dependency resolver does not currently take into account/ { next }
/^sal-detectron2 [^ ]+ requires .*, but you have / { sal++; next }
/^[A-Za-z0-9_.-]+ [^ ]+ requires .*, but you have / { print "[bootstrap] warning: pip reports a dependency conflict: " $0; next }
{ print }
END { if (sal) print "[bootstrap] note: pip lists " sal " version pin(s) of sal-detectron2 as conflicts; expected: phrasedet uses only its Python tree" }
