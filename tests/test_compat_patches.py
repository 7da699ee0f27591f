"""Each fairseq function the plugin patches (``integration/compat.py``) still has the shape the patch was written
for: the parameters its wrapper passes on, and the line of fairseq's code the patch exists for. A fairseq release
that changes one fails here, naming the patch, instead of misbehaving in training."""

import inspect

import pytest
from fairseq import checkpoint_utils
from fairseq.data import Dictionary, data_utils
from fairseq.dataclass.configs import CommonConfig
from fairseq.distributed import utils as distributed_utils
from fairseq.models import distributed_fairseq_model
from fairseq.trainer import Trainer

import fairseq_maskplug.plugin  # noqa: F401  (installs the patches)
from fairseq_maskplug.integration import compat

#: each patched function, as the module holds it after the plugin loaded, and its original's parameters
PATCHED = {
    "distributed_utils._broadcast_object_slow": (lambda: distributed_utils._broadcast_object_slow,
                                                 ["obj", "src_rank", "group", "dist_device"]),
    "distributed_utils.infer_init_method": (lambda: distributed_utils.infer_init_method, ["cfg", "force_distributed"]),
    "distributed_utils.call_main": (lambda: distributed_utils.call_main, ["cfg", "main", "kwargs"]),
    "data_utils.load_indexed_dataset": (lambda: data_utils.load_indexed_dataset,
                                        ["path", "dictionary", "dataset_impl", "combine", "default"]),
    "Dictionary.add_from_file": (lambda: Dictionary.add_from_file, ["self", "f"]),
    "checkpoint_utils._torch_persistent_save": (lambda: checkpoint_utils._torch_persistent_save, ["obj", "f"]),
    "checkpoint_utils.torch_persistent_save": (lambda: checkpoint_utils.torch_persistent_save,
                                               ["obj", "filename", "async_write"]),
    "checkpoint_utils.load_checkpoint_to_cpu": (lambda: checkpoint_utils.load_checkpoint_to_cpu,
                                                ["path", "arg_overrides", "load_on_all_ranks"]),
    "Trainer.load_checkpoint": (lambda: Trainer.load_checkpoint,
                                ["self", "filename", "reset_optimizer", "reset_lr_scheduler", "optimizer_overrides",
                                 "reset_meters"]),
}


@pytest.mark.parametrize("name", sorted(PATCHED))
def test_each_patched_function_keeps_the_parameters_its_patch_passes_on(name):
    patched, parameters = PATCHED[name]
    wrapper = patched()
    assert hasattr(wrapper, "maskplug_original"), f"{name} is not patched"
    assert list(inspect.signature(wrapper.maskplug_original).parameters) == parameters, name


def test_the_lines_of_fairseq_the_patches_exist_for_are_still_there():
    # data parallelism on CPUs: fairseq passes device_ids to torch's DDP, which the subclass drops for a CPU module
    source = inspect.getsource(distributed_fairseq_model.DistributedFairseqModel)
    assert "device_ids=[args.device_id]" in source
    assert distributed_fairseq_model.DistributedDataParallel is compat.DeviceAwareDistributedDataParallel
    # the broadcast of a loaded checkpoint: fairseq's receiving ranks torch.load it (the safe loader under torch 2.6)
    assert "torch.load(buffer" in inspect.getsource(distributed_utils._broadcast_object_slow.maskplug_original)
    # --bf16 without torch_xla: the switch the patch turns off is fairseq's common.tpu, set beside common.bf16
    assert {"bf16", "tpu", "cpu"} <= {f for f in CommonConfig.__dataclass_fields__}
