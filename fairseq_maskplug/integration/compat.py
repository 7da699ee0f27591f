"""What this stack's fairseq needs to train as the plugin's users expect (installed by :mod:`.plugin`).

- Checkpoints under torch >= 2.6 (``weights_only=True`` by default): fairseq checkpoints
  pickle ``argparse.Namespace`` and its distributed broadcast pickles
  ``_TensorPlaceholder``; both are allow-listed, so resuming keeps the safe loader.
- Released checkpoints under data parallelism: rank 0 loads a release's ``model.pt`` (old-style
  ``args``, which fairseq turns into an omegaconf ``cfg``) and broadcasts the loaded state to the
  other ranks, whose safe loader refuses omegaconf's classes. Those ranks read the broadcast
  (bytes rank 0 of the same run wrote, not a file) with the full unpickler; files keep the safe one.
- Data parallelism on CPUs with fairseq's default ``--ddp-backend pytorch_ddp``: fairseq
  passes ``device_ids=[device_id]`` to torch's ``DistributedDataParallel``, which torch
  rejects for a module on the CPU; the wrapper fairseq builds here leaves them out there.
- Launchers: ``torchrun`` and ``srun`` form one data-parallel run (see :mod:`.launch`).
- ``--bf16`` on a GPU or CPU: fairseq's parser makes ``--bf16`` imply ``--tpu`` (bf16 was a TPU-only
  mode when it was written), and its trainer then asks torch_xla for a device and fails
  (``'NoneType' object has no attribute 'xla_device'``). Where torch_xla is not installed, the TPU
  mode that ``--bf16`` switched on is switched off again before training starts, so ``--bf16`` trains
  in bfloat16 on the device there is (fairseq's FP16Optimizer with fp32 master weights, no loss
  scale). With torch_xla installed nothing changes.
- A checkpoint whose parameters do not fit the model (``--finetune-from-model``, ``--restore-file``, a
  resumed ``checkpoint_last.pt``): fairseq's "please ensure that the architectures match" becomes one
  line naming what differs (layers, width, positions, vocabulary) and the options that fix it
  (:mod:`.model_mismatch`), for ``fairseq-maskplug-train`` and ``fairseq-train`` alike.
- A damaged checkpoint file (empty, cut short, not a torch file) is named before torch reads it,
  with the intact checkpoints beside it (:mod:`..common.checkpoint_files`), wherever fairseq loads
  one (``load_checkpoint_to_cpu``: resume, ``--finetune-from-model``, the plugin's tools); the task
  options a loaded checkpoint saved under an old spelling are rewritten (:mod:`.renamed_options`).
- Checkpoints are saved whole or not at all: fairseq writes ``checkpoint_N.pt`` under a temporary
  name and renames it, but copies it to ``checkpoint_last.pt`` (and ``checkpoint_best.pt``) in place,
  so a job killed during the copy left a truncated ``checkpoint_last.pt``. Here every copy goes to a
  temporary too, and every temporary is flushed to disk (fsync) and checked whole before it replaces
  the earlier file (:class:`..common.checkpoint_files.CheckedCheckpointFiles`). A save or copy the
  disk refuses (full, a file-size limit) stops training with one line naming the checkpoint and the
  bytes written, and leaves no partial file (``torch_persistent_save``); fairseq retried it three
  times, 2.5 s apart, on the half-written file and left ``checkpoint_N.pt.tmp``.
- A binarized split whose ``.bin`` or ``.idx`` is cut short is named with the bytes it lacks before
  fairseq reads it (``load_indexed_dataset``; :mod:`..data.indexed_files`), not reported as a wrong
  token or an ``AttributeError``.
- A damaged ``dict.txt`` (empty, cut short inside its last line, not UTF-8) is named before fairseq
  reads it (``Dictionary.add_from_file`` of a path; :func:`..data.dictionaries.dictionary_damage`),
  not reported as "Incorrect dictionary format" without the file, or loaded as four symbols.
"""

import argparse
import functools
import importlib.util
import logging
import os

import torch
from torch.nn.parallel import DistributedDataParallel

from .launch import configure_launch
from .._version import RECORD_KEY, __version__, newer_version_line

logger = logging.getLogger(__name__)


def allow_fairseq_checkpoint_globals() -> None:
    """Allow-list the classes fairseq checkpoints contain for torch's safe loader."""
    if not hasattr(torch.serialization, "add_safe_globals"):  # torch < 2.4: nothing to do
        return
    from fairseq.distributed.utils import _TensorPlaceholder

    torch.serialization.add_safe_globals([argparse.Namespace, _TensorPlaceholder])


class DeviceAwareDistributedDataParallel(DistributedDataParallel):
    """torch's ``DistributedDataParallel``; for a module on the CPU without ``device_ids`` and
    ``output_device`` (torch: "only work with single-device/multiple-device GPU modules")."""

    def __init__(self, module, device_ids=None, output_device=None, **kwargs):
        if all(p.device.type == "cpu" for p in module.parameters()):
            device_ids = output_device = None
        super().__init__(module, device_ids=device_ids, output_device=output_device, **kwargs)


def _broadcast_object_slow(obj, src_rank, group, dist_device):
    """fairseq's ``_broadcast_object_slow``, the receiving ranks reading rank 0's bytes with the full
    unpickler (rank 0 produced them from a checkpoint it loaded with the safe one)."""
    import io

    from fairseq.distributed.utils import broadcast, get_rank

    if get_rank(group) == src_rank:
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        buffer = torch.ByteTensor(buffer.getbuffer()).to(dist_device)
        broadcast(torch.LongTensor([len(buffer)]).to(dist_device), src=src_rank, group=group)
        broadcast(buffer, src=src_rank, group=group)
        return obj
    length = torch.LongTensor([0]).to(dist_device)
    broadcast(length, src=src_rank, group=group)
    buffer = torch.ByteTensor(int(length.item())).to(dist_device)
    broadcast(buffer, src=src_rank, group=group)
    return torch.load(io.BytesIO(buffer.cpu().numpy()), map_location="cpu", weights_only=False)


def _infer_init_method_with_launchers(original):
    def infer_init_method(cfg, force_distributed=False):
        if configure_launch(cfg, os.environ, cpu=not torch.cuda.is_available()) is None:
            original(cfg, force_distributed)

    infer_init_method.maskplug_original = original
    return infer_init_method


def bf16_without_xla(common) -> bool:
    """Switch off the TPU mode that fairseq's ``--bf16`` implies where torch_xla is not installed (there
    it can only fail); returns whether it did. ``common``: the ``common`` group of a fairseq config."""
    if not (getattr(common, "bf16", False) and getattr(common, "tpu", False)):
        return False
    if importlib.util.find_spec("torch_xla") is not None:
        return False
    common.tpu = False
    logger.info("--bf16 without torch_xla: training in bfloat16 on %s (fairseq's --bf16 implies --tpu; "
                "switched off)", "the CPU" if common.cpu or not torch.cuda.is_available() else "CUDA")
    return True


def _call_main_with_bf16(original):
    def call_main(cfg, main, **kwargs):
        bf16_without_xla(cfg.common)
        return original(cfg, main, **kwargs)

    call_main.maskplug_original = original
    return call_main


class ModelMismatchError(ValueError):
    """A checkpoint of another model shape or dictionary than the run's (one line: the plugin's
    commands print it as their error)."""


def _train_step_announcing_micro_batches(train_step):
    """``Trainer.train_step(samples)`` telling the task first how many forwards the update holds
    (``--update-freq``; ``task.begin_update``, where a task defines it): a policy that learns from training folds
    each forward's statistics in turn, as its authors' code does (``tasks/training_feedback.py``). fairseq's run
    again after an AMP overflow calls this again and starts the count anew."""
    @functools.wraps(train_step)
    def wrapper(self, samples, *args, **kwargs):
        begin = getattr(self.task, "begin_update", None)
        if begin is not None:
            begin(len(samples))
        return train_step(self, samples, *args, **kwargs)

    wrapper.maskplug_original = train_step
    return wrapper


def _load_checkpoint_naming_mismatch(original):
    """``Trainer.load_checkpoint`` naming a model mismatch in one line and, for a task that asks for it
    (``restores_task_state``), restoring the task's state: fairseq saves ``task_state`` in every checkpoint
    but restores it only when it loads a model for inference, not on resume."""
    def load_checkpoint(self, filename, *args, **kwargs):
        try:
            extra_state = original(self, filename, *args, **kwargs)
        except Exception as error:
            if not str(error).startswith("Cannot load model parameters from checkpoint"):
                raise
            from .model_mismatch import describe_for_trainer

            message = describe_for_trainer(filename, self.cfg.model, self.model)
            if message is None:
                raise
            raise ModelMismatchError(message) from error
        if extra_state is None:
            return extra_state
        from ..common.checkpoint_files import load_state

        ck = self.cfg.checkpoint
        finetune = ck.finetune_from_model is not None and os.path.abspath(filename) == os.path.abspath(
            ck.finetune_from_model)
        restores, resumes = getattr(self.task, "restores_task_state", False), not (finetune or ck.reset_dataloader)
        if not (restores or resumes):
            return extra_state  # nothing reads the checkpoint again
        state = load_state(filename)  # every rank reads it: fairseq's own load asks every rank whether it exists
        if restores:
            self.task.load_state_dict(state.get("task_state") or {})
            if not resumes and hasattr(self.task, "restart_epochs"):
                self.task.restart_epochs()  # fairseq starts again at epoch 1: the task's epochs too
        if resumes:
            _say_what_the_resume_changes(self, filename, state)  # after the restore: its history is the newer
        return extra_state

    load_checkpoint.maskplug_original = original
    return load_checkpoint


def _say_what_the_resume_changes(trainer, filename: str, state: dict) -> None:
    """A resume (:mod:`.resume_changes`): one warning per task option that differs from the checkpoint's, an
    unknown recorded policy refused, the settings history kept in the task's state (saved with its checkpoints)."""
    from omegaconf import OmegaConf

    from .renamed_options import upgrade_task_options
    from .resume_changes import HISTORY_KEY, changed_options, check_recorded_policy, history_after

    saved = (state.get("cfg") or {}).get("task")
    if saved is None:
        return
    as_dict = lambda cfg: (OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)  # noqa: E731
                           if OmegaConf.is_config(cfg) else dict(cfg))
    saved, current = as_dict(saved), as_dict(trainer.cfg.task)
    upgrade_task_options(saved)  # a checkpoint of an earlier commit: its options under today's names
    check_recorded_policy(filename, saved)
    for line in changed_options(filename, saved, current):
        logger.warning(line)
    container = getattr(trainer.task, "state", None)
    if container is not None and hasattr(container, "merge_state_dict"):
        previous = (state.get("task_state") or {}).get(HISTORY_KEY)
        container.merge_state_dict({HISTORY_KEY: history_after(previous, saved, current, trainer.get_num_updates())})


def _load_checkpoint_to_cpu_checked(original):
    """fairseq's checkpoint reader with the file checked first, a refused pickle named in one line, renamed task
    options upgraded, and one warning where a newer major version of this package wrote the checkpoint."""
    def load_checkpoint_to_cpu(path, *args, **kwargs):
        from omegaconf import open_dict

        import pickle

        from ..common.checkpoint_files import UnsafeCheckpointError, check_checkpoint_file, refused_message
        from .renamed_options import upgrade_task_options

        check_checkpoint_file(path)
        try:
            state = original(path, *args, **kwargs)
        except pickle.UnpicklingError as error:  # the safe loader refused it: named, never loaded otherwise
            raise UnsafeCheckpointError(refused_message(path, error)) from None
        task = (state.get("cfg") or {}).get("task")
        if task is not None:
            with open_dict(task):
                upgrade_task_options(task)
        newer = newer_version_line(str(path), state.get(RECORD_KEY))
        if newer:
            logging.getLogger("fairseq_maskplug").warning(newer)
        return state

    load_checkpoint_to_cpu.maskplug_original = original
    return load_checkpoint_to_cpu


def _load_indexed_dataset_checked(original):
    def load_indexed_dataset(path, *args, **kwargs):
        from ..data.indexed_files import RECOPY, check_indexed_pair

        if path is not None:
            check_indexed_pair(path, RECOPY)
        return original(path, *args, **kwargs)

    load_indexed_dataset.maskplug_original = original
    return load_indexed_dataset


def _torch_persistent_save_named(original):
    def torch_persistent_save(obj, filename, *args, **kwargs):
        from ..common.atomic import write_failed, write_failure_in

        if isinstance(obj, dict) and "model" in obj and ("cfg" in obj or "args" in obj):  # a checkpoint
            obj[RECORD_KEY] = __version__  # the version that wrote it (read back by load_checkpoint_to_cpu)
        try:
            return original(obj, filename, *args, **kwargs)
        except Exception as caught:
            error = write_failure_in(caught)
            if error is None:
                raise
            partial = f"{filename}.tmp"  # fairseq's temporary name
            written = os.path.getsize(partial) if os.path.isfile(partial) else None
            if written is not None:
                os.remove(partial)
            raise write_failed(filename, error, written) from None

    torch_persistent_save.maskplug_original = original
    return torch_persistent_save


def _torch_save_without_retrying_a_refused_write(original):
    """fairseq's ``_torch_persistent_save`` retries a failed ``torch.save`` three times, 2.5 s apart, on
    the same half-written handle; a write the disk refused is raised at once, as the OSError it is."""
    def _torch_persistent_save(obj, f):
        if isinstance(f, str):
            return original(obj, f)
        from ..common.atomic import write_failure_in

        start = f.tell() if f.seekable() else None
        try:
            return torch.save(obj, f)
        except Exception as error:
            refused = write_failure_in(error)
            if refused is not None:
                raise refused from None
            if start is None:
                raise
            f.seek(start)
            f.truncate()
            return original(obj, f)  # fairseq's retries, for other failures

    _torch_persistent_save.maskplug_original = original
    return _torch_persistent_save


def _add_from_file_checked(original):
    def add_from_file(self, f):
        if isinstance(f, str):
            from ..data.dictionaries import check_dictionary

            check_dictionary(f)
        return original(self, f)

    add_from_file.maskplug_original = original
    return add_from_file


def _wrap_once(owner, name: str, wrap) -> None:
    """``owner.name = wrap(owner.name)`` unless it is wrapped already (each wrapper keeps what it wraps as its
    ``maskplug_original``), so that installing twice wraps once."""
    current = getattr(owner, name)
    if not hasattr(current, "maskplug_original"):
        setattr(owner, name, wrap(current))


def install() -> None:
    """Apply every item of the module docstring (idempotent)."""
    from fairseq import checkpoint_utils
    from fairseq.data import Dictionary, data_utils
    from fairseq.distributed import utils as distributed_utils
    from fairseq.models import distributed_fairseq_model
    from fairseq.trainer import Trainer

    from ..common.checkpoint_files import CheckedCheckpointFiles

    allow_fairseq_checkpoint_globals()
    if distributed_utils._broadcast_object_slow is not _broadcast_object_slow:
        _broadcast_object_slow.maskplug_original = distributed_utils._broadcast_object_slow
        distributed_utils._broadcast_object_slow = _broadcast_object_slow
    distributed_fairseq_model.DistributedDataParallel = DeviceAwareDistributedDataParallel
    if not isinstance(checkpoint_utils.PathManager, CheckedCheckpointFiles):
        checkpoint_utils.PathManager = CheckedCheckpointFiles(checkpoint_utils.PathManager)
    for owner, name, wrap in (
            (distributed_utils, "infer_init_method", _infer_init_method_with_launchers),
            (distributed_utils, "call_main", _call_main_with_bf16),
            (data_utils, "load_indexed_dataset", _load_indexed_dataset_checked),
            (Dictionary, "add_from_file", _add_from_file_checked),
            (checkpoint_utils, "_torch_persistent_save", _torch_save_without_retrying_a_refused_write),
            (checkpoint_utils, "torch_persistent_save", _torch_persistent_save_named),
            (checkpoint_utils, "load_checkpoint_to_cpu", _load_checkpoint_to_cpu_checked),
            (Trainer, "load_checkpoint", _load_checkpoint_naming_mismatch),
            (Trainer, "train_step", _train_step_announcing_micro_batches)):
        _wrap_once(owner, name, wrap)
