"""``fairseq-maskplug-train`` (:mod:`.train_cli`): ``fairseq-train`` with the plugin loaded, bad input
caught before work, and the help of the options a run really has (:mod:`.train_help`); the options
reference ``docs/reference.md``, rendered from the same registrations (:mod:`.options_reference`)."""
