"""Write an offline install bundle: everything fairseq-maskplug needs besides torch, for a
machine without internet (GPU clusters' compute nodes, the lent GPU machine).

    bash recipes/offline_bundle.sh OUT [--python 3.12] [--platform manylinux_2_28_x86_64 ...]
                                       [--extras spans,hf,tensorboard] [--exclude numpy,scipy]
                                       [--leave-out numba]

OUT gets ``wheels/`` (this package as a wheel, every dependency as a wheel for the target Python
and platform, or as a source archive where the registry has no wheel: fairseq-fixed, whose C++
extensions must be compiled against the target's own torch, and antlr4-python3-runtime),
``bundle.json`` (what is in it and the version ranges the bundle's packages accept) and
``install.py``. On the target, with its torch already installed:

    python3 OUT/install.py                 # into the running Python's environment
    python3 OUT/install.py --target DIR    # into DIR (then PYTHONPATH=DIR, PATH=DIR/bin)

The dependency list is walked from the installed metadata of this environment (the versions the
tests ran), with the target Python's markers, and stops at torch: torch, torchaudio, torchvision,
triton and the nvidia-* packages are never bundled, so a cluster's own CUDA build of torch stays.
fairseq-fixed declares torchaudio, which the plugin never imports (fairseq imports it only in its
speech modules); it is left out for the same reason. Build tools for the source archives
(setuptools, wheel, Cython) are bundled too.
"""

import argparse
import email.parser
import importlib.metadata as metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "offline_bundle"
PLUGIN = "fairseq-maskplug"
# torch and what is built with it: the target keeps its own (a CUDA build on a GPU cluster)
TORCH_FAMILY = {"torch", "torchaudio", "torchvision", "triton"}
# always as source, compiled on the target: fairseq's C++ extensions (libbase, libnat) link to the torch
# they were built with, and its Cython ones to a numpy ABI; the registry's cp312 wheel of fairseq-fixed
# (2024) was built against neither the target's torch nor numpy 2
SOURCE_ONLY = {"fairseq-fixed", "fairseq"}
BUILD_TOOLS = ["setuptools", "wheel", "cython"]  # to build the source archives with --no-build-isolation
EXTRAS = ("spans", "hf", "tensorboard")
#: dependencies the plugin runs without (imported under a guard), which ``--leave-out`` may leave out of a
#: bundle that install.py then does not require: what the plugin loses without each
RUNS_WITHOUT = {"numba": "retrieval's MaxScore kernel (fairseq_maskplug/retrieval/maxscore.py): without it, "
                         "preprocess.retrieve takes its exhaustive numpy paths, slower on long queries"}
# what the wheel of this package is built from (a copy, so the working tree gets no build/ folder)
PACKAGE_FILES = ("pyproject.toml", "README.md", "LICENSE", "fairseq_maskplug", "preprocess")


def python_version(text: str) -> str:
    if not re.fullmatch(r"3\.\d+", text):
        raise argparse.ArgumentTypeError(f"--python must look like 3.12, got {text!r}")
    return text


def name_list(text: str) -> list:
    return [canonicalize_name(n) for n in text.split(",") if n.strip()]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="offline_bundle.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the bundle directory to write (new, empty, or an earlier bundle)")
    local = f"{sys.version_info.major}.{sys.version_info.minor}"
    parser.add_argument("--python", type=python_version, default=local,
                        help=f"the target's Python version (default: this one, {local})")
    parser.add_argument("--platform", action="append", default=None,
                        help="a wheel platform tag of the target, repeatable (default: this machine's; for "
                             "another --python, manylinux_2_28/2_17/2014 of this machine's architecture)")
    parser.add_argument("--extras", type=lambda s: [e for e in s.split(",") if e], default=[],
                        help=f"optional extras to bundle, comma-separated: {', '.join(EXTRAS)}")
    parser.add_argument("--exclude", type=name_list, default=[],
                        help="packages the target already has, comma-separated (e.g. numpy,scipy): left out of "
                             "the bundle; install.py checks that they are there")
    parser.add_argument("--leave-out", type=name_list, default=[],
                        help="dependencies the plugin runs without, comma-separated, left out with the packages "
                             f"only they need (known: {', '.join(RUNS_WITHOUT)}; numba and its llvmlite are 64 "
                             "MiB of a 77 MiB bundle); install.py does not require them")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.leave_out) - set(RUNS_WITHOUT))
    if unknown:
        parser.error(f"--leave-out {','.join(unknown)}: the plugin needs it (it runs without only: "
                     f"{', '.join(RUNS_WITHOUT)})")
    unknown = sorted(set(args.extras) - set(EXTRAS))
    if unknown:
        parser.error(f"--extras {','.join(unknown)}: not an extra of {PLUGIN} (known: {', '.join(EXTRAS)})")
    return args


def bundled(name: str) -> bool:
    name = canonicalize_name(name)
    return name not in TORCH_FAMILY and not name.startswith("nvidia-")


def target_environment(python: str) -> dict:
    env = default_environment()
    env.update(python_version=python, python_full_version=f"{python}.0")
    return env


def applies(requirement: Requirement, env: dict, extras) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({**env, "extra": extra}) for extra in (extras or [""]))


def installed_version(name: str):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def archive_requirements(path: Path) -> list:
    """The ``Requires-Dist`` lines of a wheel's METADATA or a source archive's PKG-INFO."""
    text = ""
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as z:
            text = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    elif path.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(path) as t:
            member = min((m for m in t.getmembers() if m.name.endswith("/PKG-INFO")), key=lambda m: m.name.count("/"))
            text = t.extractfile(member).read().decode()
    return email.parser.Parser().parsestr(text).get_all("Requires-Dist") or []


def pip_download(requirement: str, dest: Path, tags: list) -> Path:
    """One distribution (no dependencies): a wheel for the target, else (and for :data:`SOURCE_ONLY`)
    its source archive."""
    before = set(dest.iterdir())
    base = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(dest)]
    wheel = None
    if canonicalize_name(Requirement(requirement).name) not in SOURCE_ONLY:
        wheel = subprocess.run([*base, "--only-binary=:all:", *tags, requirement], capture_output=True, text=True)
    if wheel is None or wheel.returncode != 0:
        source = subprocess.run([*base, "--no-binary=:all:", "--no-build-isolation", *tags, requirement],
                                capture_output=True, text=True)
        if source.returncode != 0:
            message = (source.stderr.strip().splitlines() or [""])[-1]
            raise RuntimeError(f"pip download {requirement}: no wheel for the target and no source archive: {message}")
    new = sorted(set(dest.iterdir()) - before)
    if not new:  # already downloaded by an earlier step
        prefix = re.sub(r"[-_.]+", "_", Requirement(requirement).name).lower()
        new = [p for p in dest.iterdir() if re.sub(r"[-_.]+", "_", p.name).lower().startswith(prefix + "_")]
    return new[0]


def tag_options(python: str, platforms) -> list:
    local = f"{sys.version_info.major}.{sys.version_info.minor}"
    if python == local and not platforms:
        return []
    machine = platform.machine()
    platforms = platforms or [f"manylinux_2_28_{machine}", f"manylinux_2_17_{machine}", f"manylinux2014_{machine}",
                              f"linux_{machine}"]
    abi = "cp" + python.replace(".", "")
    options = ["--python-version", python, "--implementation", "cp", "--abi", abi, "--abi", "abi3", "--abi", "none"]
    for tag in platforms:
        options += ["--platform", tag]
    return options


def build_plugin_wheel(dest: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "src"
        source.mkdir()
        for name in PACKAGE_FILES:
            item = ROOT / name
            if item.is_dir():
                shutil.copytree(item, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(item, source / name)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                        str(dest), str(source)], check=True)
    return next(dest.glob("fairseq_maskplug-*.whl"))


def collect(args, wheels: Path, log=print):
    """Walk the dependencies from this package, downloading each into ``wheels``; returns the
    entries of ``bundle.json``: the bundled packages in install order (build tools first), and the
    excluded ones with the versions the bundle accepts."""
    env = target_environment(args.python)
    tags = tag_options(args.python, args.platform)
    accepted = {}   # name -> SpecifierSet every bundled package's requirement on it, together
    entries = {}
    plugin = build_plugin_wheel(wheels)
    entries[canonicalize_name(PLUGIN)] = {"name": PLUGIN, "version": installed_version(PLUGIN) or "0",
                                          "file": plugin.name, "accepts": ""}
    queue = [(Requirement(r), []) for r in archive_requirements(plugin)]
    queue = [(r, args.extras) for r, _ in queue]
    queue += [(Requirement(tool), []) for tool in BUILD_TOOLS]
    while queue:
        requirement, extras = queue.pop(0)
        if not applies(requirement, env, extras) or not bundled(requirement.name):
            continue
        name = canonicalize_name(requirement.name)
        accepted.setdefault(name, SpecifierSet())
        accepted[name] &= requirement.specifier
        if name in entries or name in args.exclude or name in args.leave_out:
            continue
        local = installed_version(name)
        pin = f"{name}=={local}" if local and Version(local) in requirement.specifier else str(
            Requirement(f"{name}{requirement.specifier}"))
        log(f"[bundle] {pin}")
        path = pip_download(pin, wheels, tags)
        version = local if pin.startswith(f"{name}==") else path.name.split("-")[1]
        entries[name] = {"name": name, "version": version, "file": path.name, "accepts": ""}
        dependencies = archive_requirements(path)
        if not dependencies and local:  # a source archive without Requires-Dist: the installed metadata
            dependencies = metadata.requires(name) or []
        wanted = sorted(requirement.extras)
        queue += [(Requirement(d), wanted) for d in dependencies]
    unknown = sorted(set(args.exclude) - set(accepted))
    if unknown:
        raise ValueError(f"--exclude {','.join(unknown)}: not a dependency of {PLUGIN} for Python {args.python}, or "
                         "only through another package this --exclude leaves out")
    for name, entry in entries.items():
        entry["accepts"] = str(accepted.get(name, ""))
        if name != canonicalize_name(PLUGIN) and Version(entry["version"]) not in accepted.get(name, SpecifierSet()):
            raise RuntimeError(f"{name} {entry['version']} does not satisfy {accepted[name]} (asked by another "
                               "bundled package): install a satisfying version here and bundle again")
    order = [canonicalize_name(t) for t in BUILD_TOOLS] + ["numpy"]
    first = [entries[n] for n in order if n in entries]
    excluded = [{"name": n, "accepts": str(accepted[n])} for n in args.exclude if n in accepted]
    return first + [e for n, e in entries.items() if n not in order], excluded


def main(argv=None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from fairseq_maskplug.common.atomic import check_output_directory
    from fairseq_maskplug.tools.binarize import atomic_directory
    try:
        check_output_directory(args.out, "OUT", COMMAND, [("the repository", ROOT)])
        with atomic_directory(args.out, COMMAND) as out:
            wheels = out / "wheels"
            wheels.mkdir()
            entries, excluded = collect(args, wheels)
            shutil.copy2(ROOT / "recipes" / "offline_install.py", out / "install.py")
            manifest = {"python": args.python, "platforms": args.platform or "this machine's",
                        "extras": args.extras, "excluded": excluded,
                        "left_out": {n: RUNS_WITHOUT[n] for n in args.leave_out}, "packages": entries}
            (out / "bundle.json").write_text(json.dumps(manifest, indent=2) + "\n")
    except (ValueError, OSError, RuntimeError, subprocess.CalledProcessError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in (args.out / "wheels").iterdir()) / 2 ** 20
    print(f"[bundle] wrote {args.out}: {len(entries)} packages, {size:.1f} MiB for Python {args.python}; "
          f"on the target: python3 {os.path.join(args.out, 'install.py')} [--target DIR]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
