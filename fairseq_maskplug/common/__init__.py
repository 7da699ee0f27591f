"""What every layer shares, importing nothing else of the package (and neither fairseq nor torch):
atomic writes and the output-directory rule (:mod:`.atomic`), progress of long loops (:mod:`.progress`),
ranges of numeric options (:mod:`.option_ranges`) and classification metrics (:mod:`.metrics`)."""
