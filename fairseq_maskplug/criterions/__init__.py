"""Layer 3: fairseq criterion registrations (fairseq's --user-dir does not import this folder itself).

Half precision (``--fp16``, ``--memory-efficient-fp16``): the model's logits come in float16, and
every criterion here casts them to float32 locally (``logits.float()``) before a softmax or a
cross-entropy, so a softmax over the vocabulary, over a sentence's span candidates or over the
classes neither overflows nor loses the small probabilities; fairseq's own ``masked_lm`` and
``cross_entropy`` do the same. The meta-learned span policy's lookahead step
(``criterions/lookahead.py``) runs on the frozen seq2seq model, which its task loads in float32
whatever the precision flags (fairseq halves only the trained model), so the virtual SGD step and its
finite differences are float32. META-TARTAN's weights and dev head are float32 whatever the model
(``weighting/meta_tartan.py``). Every task trains under ``--memory-efficient-fp16 --cpu`` in the tests.
"""

from . import joint_mlm_classification, meta_span_policy, self_evolution, span_policy, tlm, token_importance  # noqa: F401,E501
