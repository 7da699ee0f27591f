"""What this stack's fairseq needs to run the plugin as users expect: checkpoint loading under
torch >= 2.6 and data parallelism (:mod:`.compat`), and how a data-parallel run is formed from its
launcher (:mod:`.launch`). :mod:`fairseq_maskplug.plugin` installs them."""
