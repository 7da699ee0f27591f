"""Install an offline bundle of fairseq-maskplug (written by ``recipes/offline_bundle.sh``) with
``pip install --no-index``, over the torch already installed here.

    python3 install.py                 # into the running Python's environment
    python3 install.py --target DIR    # into DIR; then export PYTHONPATH=DIR PATH=DIR/bin:$PATH

torch is never installed, upgraded or removed: the bundle does not carry it, this script stops
if torch is missing, and it checks at the end that torch's version is unchanged. A package that
is already installed in a version every bundled package accepts is kept (a cluster's numpy,
scipy, sentencepiece); packages left out of the bundle (``--exclude`` when it was written) must
be installed already. fairseq-fixed comes as a source archive and is compiled here against this
torch (a few minutes), without ``CUDA_HOME`` in its environment: with it set (CUDA images set it)
fairseq's setup.py adds its CUDA extensions, whose sources (``fairseq/clib/libnat_cuda``,
``fairseq/clib/cuda``) its source archive does not ship, and the build stops ("ninja: error:
.../libnat_cuda/binding.cpp ... missing"; seen on the first GPU machine, 2026-11-25). The plugin
uses none of them (they serve fairseq's non-autoregressive translation and generation).

fairseq-fixed's six C extensions compile one after another by default, three of them against
torch's headers (about a minute each); this script builds them side by side, one per core
(``--build-jobs``, default this machine's cores): the archive is unpacked, setuptools' own
``[build_ext] parallel`` option is set in its setup.cfg, and torch's ninja backend is hidden from
that build (it writes one ``build.ninja`` per build folder, which extensions built side by side
would overwrite), so torch's plain compiler backend builds each extension. The same extensions
are built, from the same sources. The standard library and pip are all this script uses.
"""

import argparse
import importlib.metadata as metadata
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

try:
    from packaging.specifiers import SpecifierSet
except ImportError:  # pip carries its own copy
    from pip._vendor.packaging.specifiers import SpecifierSet

HERE = Path(__file__).resolve().parent
BUILD_FIRST = ("setuptools", "wheel", "cython", "numpy")  # what building the source archives needs
PARALLEL_BUILD = "fairseq-fixed"  # built with its extensions side by side (the module docstring)


def version(name: str, path: list):
    found = list(metadata.distributions(name=name, path=path))
    return found[0].version if found else None


def accepts(specifier: str, installed: str) -> bool:
    return SpecifierSet(specifier).contains(installed, prereleases=True)


def plan(bundle: dict, path: list) -> tuple:
    """``(to_install, kept)``: the bundle's packages to install, in order, and ``name version`` of
    those kept. Raises SystemExit naming a missing or unacceptable excluded package."""
    for entry in bundle["excluded"]:
        installed = version(entry["name"], path)
        if installed is None or not accepts(entry["accepts"], installed):
            have = f"version {installed} is installed" if installed else "it is not installed"
            raise SystemExit(f"error: the bundle was written without {entry['name']} (--exclude), which must be "
                             f"installed here in a version {entry['accepts'] or 'of any kind'}; {have}")
    to_install, kept = [], []
    for entry in bundle["packages"]:
        installed = version(entry["name"], path)
        if entry["name"] != "fairseq-maskplug" and installed is not None and accepts(entry["accepts"], installed):
            kept.append(f"{entry['name']} {installed}")
        else:
            to_install.append(entry)
    return to_install, kept


def build_environment(env: dict) -> dict:
    """``env`` without ``CUDA_HOME``: fairseq-fixed's source archive lacks the sources of the CUDA
    extensions its setup.py adds when that variable is set (see the module docstring)."""
    return {k: v for k, v in env.items() if k != "CUDA_HOME"}


def parallel_source(archive: Path, workdir: Path, jobs: int) -> Path:
    """Unpack a setuptools source archive into ``workdir`` with ``[build_ext] parallel = jobs`` added
    to its setup.cfg (setuptools then builds that many extensions at once); returns the source folder."""
    if jobs < 1:
        raise SystemExit(f"error: --build-jobs must be at least 1, got {jobs}")
    with tarfile.open(archive) as tar:
        tar.extractall(workdir, filter="data")
    (source,) = [p for p in workdir.iterdir() if p.is_dir()]
    with open(source / "setup.cfg", "a") as cfg:
        cfg.write(f"\n[build_ext]\nparallel = {jobs}\n")
    return source


def without_ninja(env: dict, workdir: Path) -> dict:
    """``env`` with a ``ninja`` first on PATH that fails: torch's ``is_ninja_available()`` is then
    false and its extensions build with the compiler backend, safe side by side (the docstring)."""
    shim = workdir / "no-ninja"
    shim.mkdir(exist_ok=True)
    (shim / "ninja").write_text("#!/bin/sh\nexit 1\n")
    (shim / "ninja").chmod(0o755)
    return dict(env, PATH=os.pathsep.join([str(shim)] + [p for p in [env.get("PATH")] if p]))


def pip_install(entries: list, target, env: dict, jobs: int = 1) -> None:
    if not entries:
        return
    command = [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--no-build-isolation",
               "--disable-pip-version-check", "-q"]
    if target is not None:
        command += ["--target", str(target), "--upgrade"]
    with tempfile.TemporaryDirectory(prefix="maskplug-build-") as workdir:
        paths = []
        for e in entries:
            path = HERE / "wheels" / e["file"]
            if e["name"] == PARALLEL_BUILD and e["file"].endswith(".tar.gz") and jobs > 1:
                path = parallel_source(path, Path(workdir), jobs)
                env = without_ninja(env, Path(workdir))
            paths.append(str(path))
        subprocess.run(command + paths, check=True, env=env)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", type=Path, help="install into this directory instead of the environment")
    cores = os.cpu_count() or 1
    parser.add_argument("--build-jobs", type=int, default=cores,
                        help=f"fairseq-fixed's extensions compiled at once (default: the cores, {cores}; 1: one "
                             "after another, as pip alone builds them)")
    args = parser.parse_args(argv)
    if args.build_jobs < 1:
        raise SystemExit(f"error: --build-jobs must be at least 1, got {args.build_jobs}")
    bundle = json.loads((HERE / "bundle.json").read_text())
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if bundle["python"] != running:
        raise SystemExit(f"error: the bundle was written for Python {bundle['python']}, this is Python {running}: "
                         f"write it again with --python {running}")
    target = args.target.resolve() if args.target else None
    path = ([str(target)] if target else []) + sys.path
    torch = version("torch", path)
    if torch is None:
        raise SystemExit("error: torch is not installed here: install your torch build first (the bundle never "
                         "carries torch, so that a cluster's own CUDA build stays)")
    to_install, kept = plan(bundle, path)
    for name, loss in bundle.get("left_out", {}).items():
        if version(name, path) is None:
            print(f"[install] {name} was left out of the bundle (--leave-out) and is not installed here: {loss}",
                  flush=True)
    print(f"[install] torch {torch} stays; keeping {', '.join(kept) or 'nothing'}", flush=True)
    env = build_environment(os.environ)
    if "CUDA_HOME" in os.environ:
        print("[install] CUDA_HOME is set: building fairseq-fixed without it (its source archive lacks the sources "
              "of fairseq's CUDA extensions, which the plugin does not use)", flush=True)
    if target is not None:
        target.mkdir(parents=True, exist_ok=True)
        env["PYTHONPATH"] = os.pathsep.join([str(target)] + [p for p in [env.get("PYTHONPATH")] if p])
    start = time.time()
    first = [e for e in to_install if e["name"] in BUILD_FIRST]
    rest = [e for e in to_install if e["name"] not in BUILD_FIRST]
    print(f"[install] {len(to_install)} packages with no index: {', '.join(e['name'] for e in to_install)} "
          f"(fairseq-fixed compiles against this torch, {args.build_jobs} extensions at once)", flush=True)
    try:
        pip_install(first, target, env)
        built = time.time()
        pip_install(rest, target, env, args.build_jobs)
        print(f"[install] the packages after the build tools took {time.time() - built:.0f} s "
              f"({args.build_jobs} extension builds at once)", flush=True)
    except subprocess.CalledProcessError as error:
        raise SystemExit(f"error: pip install failed (exit {error.returncode}); see its messages above")
    # torch's installed version, as read before (a CUDA build's torch.__version__ adds "+cu130", its metadata not)
    check = ("import importlib.metadata, fairseq_maskplug.plugin, fairseq.tasks, torch; "
             "assert 'guided_mlm' in fairseq.tasks.TASK_REGISTRY; print(importlib.metadata.version('torch'))")
    result = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit("error: the installed plugin does not load: " + (result.stderr.strip().splitlines() or
                                                                           ["(no message)"])[-1])
    after = result.stdout.strip().splitlines()[-1]
    if after != torch:
        raise SystemExit(f"error: torch changed from {torch} to {after}")
    print(f"[install] done in {time.time() - start:.0f} s: fairseq-maskplug loads into fairseq, torch {after} "
          "unchanged", flush=True)
    if target is not None:
        print(f"[install] use it with: export PYTHONPATH={target}${{PYTHONPATH:+:$PYTHONPATH}} "
              f"PATH={target}/bin:$PATH", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
