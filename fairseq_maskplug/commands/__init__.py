"""``fairseq-maskplug-train`` (:mod:`.train_cli`): ``fairseq-train`` with the plugin loaded, bad input
caught before work, and the help of the options a run really has (:mod:`.train_help`)."""
