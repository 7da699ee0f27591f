"""Judging a trained model: accuracy and macro-F1 of a classifier (:mod:`.evaluate`), masked-LM
loss under one fixed masking (:mod:`.evaluate_mlm`) and the closed-book entity cloze (:mod:`.probe`); and seeing
what a policy does: a split's items as training builds them (:mod:`.examples`)."""
