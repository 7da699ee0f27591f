"""GPT-2 BPE vocabularies: Hugging Face ``vocab.json`` <-> fairseq ``encoder.json`` + ``dict.txt``.

fairseq encodes text in two steps: GPT-2 BPE turns it into tokens and ``encoder.json`` maps
each token to a GPT-2 label (an integer written as a string); the model's ``dict.txt`` then
maps labels to embedding rows: ``<s> <pad> </s> <unk>`` are rows 0-3, the i-th line of
``dict.txt`` is row 4 + i, and the masked-LM task appends ``<mask>`` as the last row.
A Hugging Face RoBERTa tokenizer maps tokens to rows directly (``vocab.json``), with the same
special rows. The BPE merges (``vocab.bpe`` = ``merges.txt``) are the same file in both.

So a row is the meeting point: HF -> fairseq writes ``encoder.json`` with each token's HF id
as its label and a ``dict.txt`` listing the labels in row order; fairseq -> HF gives each token
the row its label has in ``dict.txt``. Rows no token reaches (fairseq's ``madeupword`` padding)
keep a placeholder symbol so that every later row keeps its index.
"""

from typing import Dict, List, Mapping, Sequence, Tuple

FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
MASK = "<mask>"
#: how a tokenizer made with ``tokenizers`` gets fairseq's order (the usual recipe lists ``<mask>`` among the
#: trainer's special tokens, which puts it at id 4); every entry point that needs the order says it
MASK_LAST_RECIPE = ("train the tokenizer with special_tokens=['<s>', '<pad>', '</s>', '<unk>'] and add '<mask>' "
                    "after training (tokenizer.add_special_tokens(['<mask>'])), which gives it the last id")


def mask_last_problem(mask_id, size: int) -> str:
    """Why ``<mask>`` at ``mask_id`` (None: absent) of ``size`` ids is not fairseq's, with the recipe; '' if it is."""
    if mask_id == size - 1:
        return ""
    where = "has no '<mask>'" if mask_id is None else f"has '<mask>' at id {mask_id} of {size}"
    return (f"the tokenizer {where}: fairseq's masked-LM tasks add <mask> after the dictionary's last row, so it "
            f"must be the last id; {MASK_LAST_RECIPE}")


def placeholder(row: int) -> str:
    """The symbol of a row no token reaches (fairseq pads its dictionaries with ``madeupwordNNNN``)."""
    return f"madeupword{row:04d}"


def hf_to_fairseq(vocab: Mapping[str, int]) -> Tuple[Dict[str, int], List[str]]:
    """``encoder.json`` (token -> label) and the ``dict.txt`` symbols (rows 4 ..) of an HF RoBERTa vocabulary.

    Refuses a vocabulary without fairseq's layout: ``<s> <pad> </s> <unk>`` at 0-3 and
    ``<mask>`` on the last row.
    """
    for row, token in enumerate(FAIRSEQ_SPECIALS):
        if vocab.get(token) != row:
            raise ValueError(f"the vocabulary has {token!r} at {vocab.get(token)}, fairseq needs it at {row}: "
                             "train the tokenizer with special_tokens=['<s>', '<pad>', '</s>', '<unk>'], in that order")
    size = max(vocab.values()) + 1
    if mask_last_problem(vocab.get(MASK), size):
        raise ValueError(mask_last_problem(vocab.get(MASK), size))
    by_row: Dict[int, str] = {}
    for token, row in vocab.items():
        if row in by_row:
            raise ValueError(f"tokens {by_row[row]!r} and {token!r} share id {row}")
        by_row[row] = token
    specials = set(FAIRSEQ_SPECIALS) | {MASK}
    encoder = {token: row for token, row in vocab.items() if token not in specials}
    symbols = [str(row) if row in by_row else placeholder(row) for row in range(len(FAIRSEQ_SPECIALS), size - 1)]
    return encoder, symbols


def fairseq_to_hf(encoder: Mapping[str, int], symbols: Sequence[str]) -> Dict[str, int]:
    """An HF RoBERTa ``vocab.json`` (token -> row) from ``encoder.json`` and the ``dict.txt`` symbols.

    Tokens whose label is not in ``dict.txt`` are left out: fairseq maps them to ``<unk>``,
    and so does a tokenizer without them. Symbols that are no label (``madeupword0000``) keep
    their row under their own name.
    """
    token_of_label = {str(label): token for token, label in encoder.items()}
    vocab = {token: row for row, token in enumerate(FAIRSEQ_SPECIALS)}
    for i, symbol in enumerate(symbols):
        row = len(FAIRSEQ_SPECIALS) + i
        token = token_of_label.get(symbol, symbol)
        if token in vocab:
            raise ValueError(f"dict.txt line {i + 1}: {symbol!r} ({token!r}) appears twice")
        vocab[token] = row
    vocab[MASK] = len(FAIRSEQ_SPECIALS) + len(symbols)
    return vocab


def read_dict_symbols(path) -> List[str]:
    """The symbols of a fairseq ``dict.txt`` in row order (rows 4 ..), checking each ``symbol count`` line."""
    symbols = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.rstrip("\n").split(" ")
            if len(fields) < 2 or not fields[0]:
                raise ValueError(f"{path}:{number}: expected 'symbol count', got {line.rstrip()!r}")
            symbols.append(fields[0])
    return symbols


def write_dict(path, symbols: Sequence[str]) -> None:
    """A fairseq ``dict.txt``: one ``symbol count`` line per symbol (the counts are not used)."""
    with open(path, "w", encoding="utf-8") as f:
        for symbol in symbols:
            f.write(f"{symbol} 1\n")
