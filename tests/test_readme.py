"""Every shell command in the README and the docs pages runs as written, so docs and code cannot drift.

The README's commands run on the quickstart's outputs (``$W/data``,
``$W/general/checkpoint_last.pt``). ``test_readme_demo.py`` (full tier) makes a small ``work_quick/``
of that layout from the real demo sources (real ``fairseq-preprocess``, the side-information
tracks the quickstart writes, a ``roberta_tiny`` general checkpoint from a real
``fairseq-maskplug-train`` run), and every ```` ```bash ```` block of the README and of ``docs/``
(in the site's order, ``mkdocs.yml``) runs in it, in document order, after the README's First
steps' block that sets ``$TRY``; this module finds the blocks and checks them in the quick tier. A block that is not meant to run (the two main
commands, installing, GPU launches, benchmarks) is preceded by
``<!-- not run by tests/test_readme.py: REASON -->``.
"""

import os
import re
import subprocess

import numpy as np

from fairseq_helpers import BIN, REPO, check, run

SKIP = re.compile(r"<!-- not run by tests/test_readme\.py: (?P<reason>[^>]+) -->\s*$")
BLOCK = re.compile(r"^```bash\n(?P<body>.*?)^```", re.S | re.M)


def doc_pages():
    """README.md, then the pages of ``docs/`` in the order of the site's nav (``mkdocs.yml``)."""
    nav = re.findall(r"^\s*- [^:]+: (\S+\.md)\s*$", (REPO / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    return ["README.md"] + [f"docs/{page}" for page in nav]


def readme_blocks():
    """``("page:line", body, skip reason or None)`` of every bash block of the README and the docs."""
    blocks = []
    for page in doc_pages():
        text = (REPO / page).read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            skip = SKIP.search(before)
            blocks.append((f"{page}:{text[:match.start()].count(chr(10)) + 1}", match.group("body"),
                           skip["reason"] if skip else None))
    return blocks


BLOCKS = readme_blocks()
PREAMBLE = next(body for _, body, _ in BLOCKS if re.search(r"^TRY=", body, re.M))


def first_steps_blocks():
    """``(line, body)`` of the README's First steps after its preamble: what a newcomer runs first."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("\n## First steps\n")
    end = text.index("\n## ", start + 1)
    first = text[:start].count("\n") + 1, text[:end].count("\n") + 1
    return [(line, body) for line, body, reason in BLOCKS if line.startswith("README.md:") and reason is None
            and first[0] < int(line.split(":")[1]) < first[1] and body is not PREAMBLE]


RUNNABLE = [(line, body) for line, body, reason in BLOCKS if reason is None and body is not PREAMBLE]
#: the First steps' preamble as a ``QUICK=1`` user sets it (``W=work_quick``, as its comment says)
QUICK_PREAMBLE = PREAMBLE.replace("W=work ", "W=work_quick ", 1)
#: a path under the quickstart's directory written out instead of through ``$W``
HARD_CODED_WORK = re.compile(r"(?<![\w$./-])work/")
FIRST_STEPS = first_steps_blocks()
#: the blocks tests/test_recipe_stages.py runs after a real ``QUICK=1`` quickstart, on its output: the First steps,
#: the BART page's salient-span step (its model feeds the next) and the Hugging Face page top to bottom;
#: tests/test_readme_demo.py runs every other runnable block
AFTER_QUICKSTART = FIRST_STEPS + [(line, body) for line, body in RUNNABLE if line.startswith("docs/bart-policies.md:")
                                  and "--save-dir $W/first-steps/ssm" in body] \
    + [(line, body) for line, body in RUNNABLE if line.startswith("docs/huggingface.md:")]


def test_every_docs_page_is_in_the_site():
    pages = {f"docs/{path.name}" for path in (REPO / "docs").glob("*.md")}
    assert pages == set(doc_pages()) - {"README.md"}, "add the page to mkdocs.yml's nav"


def test_readme_blocks_are_run_or_say_why_not():
    assert len(RUNNABLE) >= 8, "the README and docs lost their runnable examples"
    assert len(FIRST_STEPS) >= 5 and all("$W/" in body for _, body in FIRST_STEPS), FIRST_STEPS
    assert PREAMBLE.startswith("W=work ") and "W=work_quick" in PREAMBLE
    for line, body, reason in BLOCKS:
        assert "..." not in body or reason, f"{line}: a command with '...' cannot run as written"
        if reason and reason.startswith("the same command as"):  # a copy must stay the block that runs
            assert body in {PREAMBLE} | {runnable for _, runnable in RUNNABLE}, \
                f"{line}: no longer the block it says it copies"
    tasks = " ".join(body for _, body in RUNNABLE)
    for task in ("guided_mlm", "selective_mlm", "fe_mlm", "token_importance", "joint_mlm_classification",
                 "guided_denoising"):
        assert f"--task {task}" in tasks, f"no runnable README command trains --task {task}"


def test_no_block_hard_codes_the_work_directory():
    """Every command reads the quickstart's directory through ``$W``: a QUICK user's ``work_quick/`` has the same
    layout, and a block that names ``work/`` fails there (the README's plain fairseq-train block did)."""
    hard_coded = [line for line, body, _ in BLOCKS if body is not PREAMBLE and HARD_CODED_WORK.search(body)]
    assert not hard_coded, f"use $W/ instead of work/ in: {hard_coded}"
    assert QUICK_PREAMBLE != PREAMBLE


def test_every_method_page_one_click_from_the_readme_trains_on_the_demo_data():
    """A newcomer goes from the README's method table to a running first command in one click: each
    page the table links holds a block that runs (in the tests, as written) and trains."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Which method for my task", 1)[1].split("\n## ", 1)[0]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    pages = sorted(set(re.findall(r"\]\((docs/[\w-]+\.md)\)", table)))
    assert len(pages) >= 6, pages
    for page in pages:
        trains = [line for line, body in RUNNABLE if line.startswith(page + ":")
                  and re.search(r"^\s*(fairseq-maskplug-train|fairseq-train|fairseq-maskplug-compare) ", body, re.M)]
        assert trains, f"{page}: no block that runs in the tests trains on the demo data"


def write_quickstart_tracks(data, seed: int = 0):
    """The tracks the quickstart writes, with random values: the tagger's P(important) on the
    reviews (In-domain Mask) and the buffer algorithm's 0/1 labels on MR (Downstream Mask)."""
    from fairseq.data import data_utils
    from fairseq.data.dictionary import Dictionary
    from fairseq_maskplug.data import write_side_info

    rng = np.random.default_rng(seed)
    dictionary = Dictionary.load(str(data / "general" / "dict.txt"))
    for directory, dtype in ((data / "indomain", "float64"), (data / "mr" / "input0", "uint8")):
        for split in ("train", "valid"):
            tokens = data_utils.load_indexed_dataset(str(directory / split), dictionary)
            rows = [(rng.random(n) if dtype == "float64" else rng.integers(0, 2, n)).astype(dtype)
                    for n in tokens.sizes]
            write_side_info(str(directory / f"{split}.importance"), rows, dtype,
                            tokens_prefix=str(directory / split))


def run_readme_block(work_root, line, body, preamble=PREAMBLE):
    """Run one README block after the First steps' ``$TRY`` (or ``preamble``) in ``work_root`` and check
    that every training it starts finishes with finite losses."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", PYTHONWARNINGS="ignore")
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", preamble + body], cwd=work_root,
                            capture_output=True, text=True, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{line} failed:\n{body}\n{output[-4000:]}"
    trainings = len(re.findall(r"^\s*(?:fairseq-maskplug-train|fairseq-train|fairseq-hydra-train) ", body, re.M))
    assert output.count("done training") == trainings, f"{line}: not every training finished"
    assert "| nan |" not in output and " loss nan " not in output
    if "fairseq-maskplug-evaluate " in body:
        assert '"units": "percent"' in result.stdout


def finish_work(root, name="work"):
    """What the README's commands take besides the data: the general checkpoint
    (``work/general/checkpoint_last.pt``, a real 2-update run), ``work/first-steps.args`` as the quickstart
    writes it (the model's shape, block length, checkpoint), and ``examples/``, ``recipes/``."""
    work = root / name
    model = ["--arch", "roberta_tiny", "--tokens-per-sample", "128"]
    check(run([BIN / "fairseq-maskplug-train", work / "data" / "general", "--task", "guided_mlm", *model, "--cpu",
               "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "8", "--max-update", "2",
               "--no-epoch-checkpoints", "--save-dir", work / "general"]))
    (work / "first-steps.args").write_text(" ".join([*model, "--finetune-from-model",
                                                     str(work / "general" / "checkpoint_last.pt")]) + "\n")
    os.symlink(REPO / "examples", root / "examples")
    os.symlink(REPO / "recipes", root / "recipes")
    return root
