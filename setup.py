from setuptools import find_packages, setup

setup(
    name="fairseq-maskplug",
    version="0.1.0",
    description="Task-guided masking policies and tasks for fairseq masked-LM training",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["fairseq_maskplug", "fairseq_maskplug.*"]),
    python_requires=">=3.8",
    install_requires=[
        "torch",
        "numpy",
        "sentencepiece",
        "rank-bm25",
        # fairseq 0.12.2 does not import on Python >= 3.11; fairseq-fixed is the
        # maintained fork that does. Both install the `fairseq` import package.
        # Keeping your own fairseq: install this package with `pip install --no-deps`.
        'fairseq==0.12.2; python_version < "3.11"',
        'fairseq-fixed>=0.12.3.1; python_version >= "3.11"',
    ],
    extras_require={"test": ["pytest>=7", "scipy"], "bench": ["matplotlib"]},
    entry_points={
        "console_scripts": [
            "fairseq-maskplug-dir = fairseq_maskplug.cli:print_user_dir",
            "fairseq-maskplug-train = fairseq_maskplug.train_cli:console_main",
        ],
    },
)
