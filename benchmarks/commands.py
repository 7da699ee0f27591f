"""Running the commands a benchmark prepares its inputs with (``fairseq-preprocess``, a short
``fairseq-train``): quietly when they work, with their own words when they do not."""

import signal
import subprocess


def run_checked(args, tail: int = 4000, **kwargs) -> subprocess.CompletedProcess:
    """Run ``args`` with its output captured; if it fails, raise ``RuntimeError`` naming the program,
    how it ended (exit status or signal) and the last ``tail`` characters of its stderr and stdout."""
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        code = result.returncode
        ended = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        raise RuntimeError(f"{args[0]} ended with {ended}; its stderr:\n{result.stderr[-tail:]}\n"
                           f"its stdout:\n{result.stdout[-tail:]}\n({args[0]} ended with {ended})")
    return result
