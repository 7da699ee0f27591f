"""``fairseq-maskplug-compare``: arms (a continued pre-training stage each, or none) against a baseline on
one's own corpus and labelled task, over seeds, on one machine or a scheduler's array, reported with paired
statistics. :mod:`.plan` reads a plan, :mod:`.checks` checks it before any work, :mod:`.commands` makes each
unit's command lines, :mod:`.units` runs a unit, :mod:`.report` writes the report, :mod:`.cli` is the command."""
