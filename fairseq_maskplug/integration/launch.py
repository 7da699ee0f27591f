"""How a data-parallel run is formed from the way its processes were launched.

fairseq forms a multi-process run from ``torchrun`` only when ``--distributed-world-size``
is not 1, and that option defaults to the number of visible GPUs: on CPUs (0 GPUs) and on
nodes with one GPU, ``torchrun --nproc-per-node N`` silently starts N independent
single-process runs that write the same save directory. Under SLURM ``srun`` on CPUs the
same happens. :func:`configure_launch` reads the launcher's environment instead:

- ``torchrun`` (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``):
  one run of ``WORLD_SIZE`` workers, ``env://`` rendezvous, multi-node included;
- ``srun`` (``SLURM_STEP_ID``, ``SLURM_NTASKS`` > 1, ``SLURM_PROCID``, ``SLURM_LOCALID``):
  one run of ``SLURM_NTASKS`` workers meeting at ``MASTER_ADDR:MASTER_PORT`` (export both in
  the job script; ``--distributed-port`` may give the port);

each worker uses GPU ``LOCAL_RANK`` (``SLURM_LOCALID``), or the CPU with the ``gloo``
backend. Anything fairseq already handles (an explicit ``--distributed-init-method``,
fairseq's own spawning of one process per visible GPU) is left alone. Several CPU workers
without a launcher are refused with the command that starts them.
"""

from typing import Mapping, NamedTuple, Optional

TORCHRUN_KEYS = ("WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT")


class LaunchError(ValueError):
    """The launch cannot form the data-parallel run that was asked for."""


class Launch(NamedTuple):
    launcher: str  # "torchrun" or "srun"
    world_size: int
    rank: int
    local_rank: int
    init_method: str


def _int(environ: Mapping[str, str], key: str) -> int:
    try:
        return int(environ[key])
    except ValueError:
        raise LaunchError(f"environment variable {key}={environ[key]!r} is not an integer") from None


def detect_launch(environ: Mapping[str, str], port: int = -1) -> Optional[Launch]:
    """The launcher that started this process with other workers, or None (a single process)."""
    if all(key in environ for key in TORCHRUN_KEYS):
        local = _int(environ, "LOCAL_RANK") if "LOCAL_RANK" in environ else 0
        return Launch("torchrun", _int(environ, "WORLD_SIZE"), _int(environ, "RANK"), local, "env://")
    if "SLURM_STEP_ID" in environ and "SLURM_NTASKS" in environ and _int(environ, "SLURM_NTASKS") > 1:
        addr = environ.get("MASTER_ADDR")
        port = port if port > 0 else (_int(environ, "MASTER_PORT") if "MASTER_PORT" in environ else -1)
        if not addr or port <= 0:
            raise LaunchError("srun started several tasks: export MASTER_ADDR (the first node's host name) and "
                              "MASTER_PORT (a free port) in the job script, or launch with torchrun")
        return Launch("srun", _int(environ, "SLURM_NTASKS"), _int(environ, "SLURM_PROCID"),
                      _int(environ, "SLURM_LOCALID"), f"tcp://{addr}:{port}")
    return None


def configure_launch(dt, environ: Mapping[str, str], cpu: bool) -> Optional[Launch]:
    """Set fairseq's distributed options ``dt`` (``cfg.distributed_training``) for the launch.

    Args:
        dt: fairseq's ``DistributedTrainingConfig`` (changed in place).
        environ: the process environment.
        cpu: the workers train on CPUs (``--cpu`` or no GPU): ``gloo`` instead of ``nccl``.

    Returns the launch applied, or None where nothing was changed.
    """
    if dt.distributed_init_method is not None:
        return None  # the user set the rendezvous explicitly
    launch = detect_launch(environ, dt.distributed_port)
    if launch is None:
        if cpu and dt.distributed_world_size > 1:
            n = dt.distributed_world_size
            raise LaunchError(f"--distributed-world-size {n} on CPUs: start the {n} worker processes with "
                              f"`torchrun --standalone --nproc-per-node {n} $(which fairseq-maskplug-train) ...`")
        return None
    if launch.world_size < 2:
        return None
    if not 0 <= launch.rank < launch.world_size:
        raise LaunchError(f"{launch.launcher}: rank {launch.rank} outside world size {launch.world_size}")
    dt.distributed_init_method = launch.init_method
    dt.distributed_world_size = launch.world_size
    dt.distributed_rank = launch.rank
    dt.device_id = 0 if cpu else launch.local_rank
    dt.distributed_no_spawn = True  # the launcher started every worker
    if cpu and dt.distributed_backend == "nccl":
        dt.distributed_backend = "gloo"
    return launch
