"""Classification metrics shared by the criteria (logged) and the evaluator (pure NumPy)."""

import numpy as np


def f1_from_counts(tp, fp, fn) -> float:
    """F1 = 2PR/(P+R) = 2 tp / (2 tp + fp + fn); 0 for a class never predicted nor present."""
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def macro_f1(predictions: np.ndarray, targets: np.ndarray, num_classes: int) -> float:
    """Unweighted mean over classes of :func:`f1_from_counts`."""
    return float(np.mean([f1_from_counts(np.sum((predictions == c) & (targets == c)),
                                         np.sum((predictions == c) & (targets != c)),
                                         np.sum((predictions != c) & (targets == c)))
                          for c in range(num_classes)]))
