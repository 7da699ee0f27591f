"""Loading the checkpoints the producers score with, every check made before any work: the sentence
classifier of Downstream Mask (``score_importance``). The token-importance tagger (``annotate_importance``) and a
span policy (``score_spans``) are read by :class:`.model_tracks.ReadsCheckpoint`; :data:`POLICY_TASKS` are the
latter's tasks."""

import os

from ..tools.checkpoints import load_checked_state, model_from_state

#: the tasks whose checkpoints hold a span-policy head
POLICY_TASKS = ("span_policy", "meta_span_policy")


def check_split(data, split):
    """The sentence_prediction layout of ``split``: ``input0/`` and ``label/``."""
    for sub in ("input0", "label"):
        if not os.path.exists(os.path.join(data, sub, f"{split}.idx")):
            raise FileNotFoundError(f"{os.path.join(data, sub, split)}.bin/.idx not found: --data needs the "
                                    "sentence_prediction layout (input0/, label/)")


def load_task_split(checkpoint, data, split, head, trust_dictionary=False):
    """Classifier model, dictionary, token lines and class indices of ``split``; bad input raises
    ``FileNotFoundError``/``ValueError`` with a message naming the file."""
    model, task, num_classes = load_classifier(checkpoint, data, head, trust_dictionary, [split])
    return (model, task.source_dictionary, *load_split(data, split, task, num_classes))


def load_split(data, split, task, num_classes):
    """``(token lines, class indices)`` of ``split``."""
    from ..data.classification import load_classification_split

    return load_classification_split(data, split, task.source_dictionary, task.label_dictionary, num_classes)


def load_classifier(checkpoint, data, head, trust_dictionary, splits):
    """``(model, task, num_classes)`` of the classifier fine-tuned on the task, after checking
    that every split exists."""
    for split in splits:
        check_split(data, split)
    state = load_checked_state(checkpoint, data, trust_dictionary)
    if not any(k.startswith(f"classification_heads.{head}.") for k in state["model"]):
        raise ValueError(f"{checkpoint} is a {state['cfg']['task']['_name']} checkpoint without a classification "
                         f"head {head!r}; the classifier fine-tuned on the task (sentence_prediction) is needed")
    model, task = model_from_state(checkpoint, state)
    return model, task, state["cfg"]["task"]["num_classes"]
