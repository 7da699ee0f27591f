"""Which ``--criterion`` each package task trains with.

fairseq's ``--criterion`` defaults to ``cross_entropy``, which on a masked-LM task
predicts every token of the (corrupted) input, and fairseq's ``sentence_prediction`` on
``joint_mlm_classification`` trains the classifier without the MLM loss: both run without
an error. Each package task names the criteria it works with (:attr:`criteria`, the
first is its default); ``fairseq-maskplug-train`` adds the default when ``--criterion``
is left out, and the task refuses any other when it builds its criterion (:class:`~.task_base.PackageTask`).
"""

from typing import Sequence

#: why a criterion someone might reach for is wrong for these tasks
_WHY_NOT = {
    "cross_entropy": "it predicts every input token instead of the masked ones",
    "sentence_prediction": "it trains the classifier without the masked-LM loss",
    "masked_lm": "it reads masked-LM batches, not (source, target) pairs",
}


def check_criterion(task_name: str, criteria: Sequence[str], criterion_name: str) -> None:
    """Refuse ``criterion_name`` unless it is one of the task's ``criteria``."""
    if criterion_name in criteria:
        return
    why = f" ({_WHY_NOT[criterion_name]})" if criterion_name in _WHY_NOT else ""
    accepted = " or ".join(f"--criterion {c}" for c in criteria)
    raise ValueError(f"--task {task_name} trains with {accepted}, not --criterion {criterion_name}{why}; "
                     f"fairseq-maskplug-train adds --criterion {criteria[0]} when --criterion is left out")
