"""What the command-line tools share (``preprocess/``, :mod:`fairseq_maskplug.commands`,
:mod:`fairseq_maskplug.evaluation`): options, output checks and quiet logging (:mod:`.cli`), checkpoints
opened with every check before work (:mod:`.checkpoints`), sentencepiece and ``fairseq-preprocess``
binarization (:mod:`.binarize`)."""
