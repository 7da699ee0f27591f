"""The offline install bundle (recipes/offline_bundle.sh, install.py): which packages it walks to
for a target Python, what install.py keeps, installs or refuses, and (full tier) a fresh
environment with only torch that installs the bundle with no index and trains a task."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from fairseq_helpers import CPU_RUN, REPO, TINY_ROBERTA, check, json_logs, write_corpus
from recipes import offline_bundle, offline_install

PLUGIN_REQUIRES = ['fairseq==0.12.2; python_version < "3.11"', 'fairseq-fixed>=0.12.3.1; python_version >= "3.11"',
                   'spacy<3.9,>=3.8; extra == "spans"']


@pytest.mark.parametrize("python, expected", [("3.10", {"fairseq"}), ("3.12", {"fairseq-fixed"})])
def test_the_walk_follows_the_target_pythons_markers(python, expected):
    env = offline_bundle.target_environment(python)
    def chosen(extras):
        return {Requirement(r).name for r in PLUGIN_REQUIRES if offline_bundle.applies(Requirement(r), env, extras)}
    assert chosen([]) == expected
    assert chosen(["spans"]) == expected | {"spacy"}


def test_torch_and_what_is_built_with_it_are_never_bundled():
    for name in ("torch", "torchaudio", "TorchVision", "triton", "nvidia-cudnn-cu12"):
        assert not offline_bundle.bundled(name)
    for name in ("fairseq-fixed", "hydra-core", "numpy"):
        assert offline_bundle.bundled(name)


def test_wheel_tags_for_another_python_name_its_abi_and_manylinux():
    assert offline_bundle.tag_options(f"{sys.version_info.major}.{sys.version_info.minor}", None) == []
    options = offline_bundle.tag_options("3.12", None)
    assert options[:6] == ["--python-version", "3.12", "--implementation", "cp", "--abi", "cp312"]
    assert "manylinux_2_28_" + os.uname().machine in options
    assert offline_bundle.tag_options("3.12", ["musllinux_1_2_x86_64"])[-2:] == ["--platform", "musllinux_1_2_x86_64"]


@pytest.mark.parametrize("argv, message", [(["out", "--python", "3"], "--python must look like 3.12"),
                                           (["out", "--extras", "spans,gpu"], "--extras gpu: not an extra"),
                                           (["out", "--leave-out", "numpy"], "--leave-out numpy: the plugin needs it")])
def test_bad_bundle_options_are_one_line(argv, message, capsys):
    with pytest.raises(SystemExit):
        offline_bundle.parse_args(argv)
    assert message in capsys.readouterr().err


def test_the_plugin_loads_and_retrieves_without_what_leave_out_may_leave_out():
    """``--leave-out`` names only packages the plugin runs without: with them unimportable the plugin
    registers its tasks and retrieval takes its numpy paths (the lent GPU machine's bundle leaves numba,
    64 MiB with llvmlite, out)."""
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in offline_bundle.RUNS_WITHOUT)
    code = (f"import sys; {blocked}; import fairseq_maskplug.plugin, fairseq.tasks; "
            "from fairseq_maskplug.retrieval import maxscore; "
            "assert 'guided_mlm' in fairseq.tasks.TASK_REGISTRY and not maxscore.AVAILABLE; print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "ok"


def installed(site: Path, name: str, version: str) -> None:
    """A distribution's metadata, as pip leaves it in site-packages."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def entry(name, version, accepts=""):
    return {"name": name, "version": version, "file": f"{name}-{version}.whl", "accepts": accepts}


def test_install_keeps_what_is_installed_and_accepted_and_replaces_the_rest(tmp_path):
    installed(tmp_path, "numpy", "2.5.0")
    installed(tmp_path, "omegaconf", "2.1.0")
    installed(tmp_path, "fairseq-maskplug", "0.1.0")
    bundle = {"excluded": [], "packages": [entry("numpy", "2.4.6", ">=1.21.3"), entry("omegaconf", "2.3.0", "==2.3.0"),
                                           entry("bitarray", "3.12.3"), entry("fairseq-maskplug", "0.1.0")]}
    to_install, kept = offline_install.plan(bundle, [str(tmp_path)])
    assert kept == ["numpy 2.5.0"]  # a cluster's newer numpy stays
    # fairseq needs omegaconf 2.3.0 exactly; bitarray is missing; the plugin is always the bundle's
    assert [e["name"] for e in to_install] == ["omegaconf", "bitarray", "fairseq-maskplug"]


@pytest.mark.parametrize("site, message", [
    ({}, "written without scipy (--exclude), which must be installed here in a version >=1.10.0; it is not installed"),
    ({"scipy": "1.9.0"}, "in a version >=1.10.0; version 1.9.0 is installed")])
def test_install_refuses_an_excluded_package_that_is_missing_or_too_old(tmp_path, site, message):
    for name, version in site.items():
        installed(tmp_path, name, version)
    bundle = {"excluded": [{"name": "scipy", "accepts": ">=1.10.0"}], "packages": []}
    with pytest.raises(SystemExit, match=message.replace("(", r"\(").replace(")", r"\)")):
        offline_install.plan(bundle, [str(tmp_path)])


def test_install_refuses_a_bundle_for_another_python(tmp_path):
    (tmp_path / "bundle.json").write_text(json.dumps({"python": "3.99", "excluded": [], "packages": []}))
    (tmp_path / "install.py").write_text((REPO / "recipes" / "offline_install.py").read_text())
    result = subprocess.run([sys.executable, tmp_path / "install.py"], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: the bundle was written for Python 3.99, this is Python {sys.version_info.major}."
        f"{sys.version_info.minor}: write it again with --python {sys.version_info.major}.{sys.version_info.minor}"]


def test_fairseq_fixed_is_built_without_cuda_home():
    """fairseq-fixed's source archive lacks the sources of the CUDA extensions its setup.py adds when
    CUDA_HOME is set (the first GPU machine's build stopped there): install.py's builds run without it."""
    env = offline_install.build_environment({"CUDA_HOME": "/usr/local/cuda", "PATH": "/usr/bin"})
    assert env == {"PATH": "/usr/bin"}


def offline_environment() -> dict:
    """No pip configuration, no package source, and a proxy that refuses every connection: pip
    can reach nothing but the files it is given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    refused = "http://127.0.0.1:9"
    return dict(env, PIP_CONFIG_FILE=os.devnull, http_proxy=refused, https_proxy=refused, HTTP_PROXY=refused,
                HTTPS_PROXY=refused, PYTHONWARNINGS="ignore")


@pytest.mark.e2e
@pytest.mark.full
def test_a_fresh_environment_with_only_torch_installs_the_bundle_offline_and_trains(tmp_path):
    import torch
    bundle = tmp_path / "bundle"
    made = check(subprocess.run(["bash", REPO / "recipes" / "offline_bundle.sh", bundle], capture_output=True,
                                text=True, cwd=REPO))
    assert "[bundle] wrote" in made.stdout
    names = {e["name"] for e in json.loads((bundle / "bundle.json").read_text())["packages"]}
    assert {"fairseq-maskplug", "fairseq-fixed", "hydra-core", "omegaconf", "antlr4-python3-runtime", "bitarray",
            "bm25s", "rank-bm25", "sentencepiece"} <= names
    assert not names & {"torch", "torchaudio"}
    assert (bundle / "wheels" / "fairseq_fixed-0.12.3.1.tar.gz").is_file()  # compiled against the target's torch

    # the target: a fresh environment with torch only (the one package taken from the registry)
    venv = tmp_path / "venv"
    check(subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True))
    python = venv / "bin" / "python"
    torch_version = torch.__version__
    check(subprocess.run([python, "-m", "pip", "install", "-q", f"torch=={torch_version.split('+')[0]}"],
                         capture_output=True, text=True))
    offline = offline_environment()
    # as on a CUDA image (the first GPU machine set it): fairseq's setup.py then adds CUDA extensions whose
    # sources its archive lacks; install.py builds without it
    result = check(subprocess.run([python, bundle / "install.py"], capture_output=True, text=True,
                                  env=dict(offline, CUDA_HOME=str(tmp_path / "cuda")), cwd=tmp_path))
    assert "CUDA_HOME is set: building fairseq-fixed without it" in result.stdout
    assert f"torch {torch_version} stays" in result.stdout
    assert f"torch {torch_version} unchanged" in result.stdout
    listed = subprocess.run([python, "-m", "pip", "list", "--format", "json"], capture_output=True, text=True,
                            env=offline).stdout
    versions = {p["name"].lower(): p["version"] for p in json.loads(listed)}
    assert versions["torch"] == torch_version and "torchaudio" not in versions

    # it trains, from the installed package (run outside the repository)
    corpus = write_corpus(tmp_path / "corpus.txt", 60, seed=0)
    check(subprocess.run([venv / "bin" / "fairseq-preprocess", "--only-source", "--trainpref", corpus,
                          "--validpref", corpus, "--destdir", tmp_path / "data", "--workers", "1"],
                         capture_output=True, text=True, env=offline, cwd=tmp_path))
    where = subprocess.run([python, "-c", "import fairseq_maskplug; print(fairseq_maskplug.__file__)"],
                           capture_output=True, text=True, env=offline, cwd=tmp_path).stdout
    assert Path(where.strip()).is_relative_to(venv)
    trained = check(subprocess.run(
        [venv / "bin" / "fairseq-maskplug-train", tmp_path / "data", "--task", "guided_mlm", "--criterion",
         "masked_lm", "--tokens-per-sample", "32", "--save-dir", tmp_path / "ck", "--max-update", "3",
         *TINY_ROBERTA, *CPU_RUN], capture_output=True, text=True, env=offline, cwd=tmp_path))
    records = json_logs(trained, "train_inner")
    assert [int(r["num_updates"]) for r in records] == [1, 2, 3]
    assert all(math.isfinite(float(r["loss"])) for r in records)
