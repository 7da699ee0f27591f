"""What a producer that scores binarized splits with a model declares besides its values (issue 54): the
checkpoint it reads (:class:`ReadsCheckpoint`) and the options every model producer takes
(:class:`ScoringOptions`, :class:`PreviewedScoringOptions`). The command is a
:class:`~..tools.producer.TokenProducer`: ``score-pll``, ``annotate-importance``, ``score-spans``,
``score-importance`` (its own loader: a classifier and its head) and a producer of your own
(``examples/token_entropy.py``). Its lines are scored block by block (``--shard-block-lines``), never a
batch across two blocks, so a line's values do not depend on the shards.
"""

from dataclasses import dataclass

from ..common.option_ranges import option


@dataclass
class ScoringOptions:
    """``--max-tokens``, the batch size of a model producer's forwards (each block's lines batched up to it)."""

    max_tokens: int = option(4096, "padded tokens per forward", range="[1, inf)", source="ours")


@dataclass
class PreviewedScoringOptions(ScoringOptions):
    """:class:`ScoringOptions` and ``--preview-lines``, of a producer that writes a preview of each split's first
    lines (not recorded in the parts: the values do not depend on it)."""

    preview_lines: int = option(200, "lines shown in the preview file", range="[0, inf)", source="ours",
                                recorded=False)


class ReadsCheckpoint:
    """What a :class:`~..tools.producer.TokenProducer` that scores with a model reads: ``--checkpoint`` and the
    scoring options (``--fp16``/``--bf16``, ``--trust-dictionary``, ``--user-dir``). Opened before any work: the
    user directory imported, the shard on its rank's device with its number format checked
    (:func:`.precision.start_model_producer`), the checkpoint checked against the data's dictionary (and its task
    against ``tasks``, or ``refuse``) and its model loaded in eval mode; ``values`` gets ``model``, ``task``,
    ``device``, ``precision`` and ``checkpoint`` (its path), each block is computed under
    :func:`.precision.inference`, and the parts record the checkpoint's identity and the number format."""

    def __init__(self, wanted: str, refuse=None, tasks=None, load=None):
        from ..tools.checkpoints import CLASSIFIER_TASKS

        self.wanted = wanted  #: what kind of checkpoint, for ``--help`` and a refusal
        self.refuse = CLASSIFIER_TASKS + ("token_importance",) if refuse is None else tuple(refuse)  #: tasks refused
        self.tasks = tasks  #: the tasks accepted (None: any not refused)
        #: ``load(args, data) -> (model, task, more inputs)``, checks of its own made, instead of the checked model
        #: of ``tasks`` (None)
        self.load = load

    def add_options(self, parser) -> None:
        from ..tools.cli import add_checkpoint_options

        parser.add_argument("--checkpoint", required=True, help=self.wanted)
        add_checkpoint_options(parser)

    def open(self, args, data: str, dictionary):
        from ..tools.checkpoints import load_checked_model
        from ..tools.cli import import_user_dir
        from ..tools.producer import Opened
        from ..tools.sharding import checkpoint_identity
        from .precision import inference, start_model_producer

        import_user_dir(args.user_dir)
        shard, precision, device = start_model_producer(args, data)
        if self.load is not None:
            model, task, more = self.load(args, data)
        else:
            more = {}
            model, task, _ = load_checked_model(args.checkpoint, data, args.trust_dictionary, tasks=self.tasks,
                                                refuse=() if self.tasks else self.refuse, wanted=self.wanted)
        model.eval()
        return Opened(shard, {"model": model, "task": task, "device": device, "precision": precision,
                              "checkpoint": args.checkpoint, **more},
                      {**checkpoint_identity(args.checkpoint), "precision": precision},
                      lambda: inference(precision, device))
