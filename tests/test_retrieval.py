"""BM25 retrieval for TLM: the analyser, Lucene's formulas by hand, the two backends against each
other (ties included), the chunked index, RAKE, the command's outputs and its refusals."""

import json
import math
import os

import numpy as np
import pytest

from fairseq_maskplug.retrieval import (Analyser, Bm25sSearcher, RankBm25Searcher, lucene_idf, lucene_term_score,
                                        rake_phrases, rake_query, top_k)
from fairseq_maskplug.retrieval import word_kernel
from fairseq_maskplug.retrieval.index import build_index
from fairseq_maskplug.retrieval.search import ShardedSearcher, open_bm25s
from preprocess.retrieve import main as retrieve_main


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_analyser_lower_cases_unicode_word_tokens():
    assert Analyser().tokens("Don't STOP-me, Ünïcode 3.5!") == ["don", "t", "stop", "me", "ünïcode", "3", "5"]
    assert Analyser(lowercase=False).tokens("Ab cD") == ["Ab", "cD"]
    assert Analyser(stopwords=frozenset({"the"})).tokens("The cat the") == ["cat"]
    for empty in (r"\w*", r"\b", r"(?:x|)"):  # each matched every text through the empty token
        with pytest.raises(ValueError, match="matches the empty string"):
            Analyser(empty)
    with pytest.raises(ValueError, match="capturing group"):
        Analyser(pattern=r"(\w)+")


def test_lucene_idf_and_term_score_on_hand_computed_cases():
    # ln(1 + (N - n + 0.5) / (n + 0.5))
    assert lucene_idf(4, 1) == pytest.approx(math.log(1 + 3.5 / 1.5), rel=1e-12)
    assert lucene_idf(4, 4) == pytest.approx(math.log(1 + 0.5 / 4.5), rel=1e-12)
    # idf * tf / (tf + k1 (1 - b + b dl / avgdl)), k1 = 1.2, b = 0.75
    assert lucene_term_score(1.0, 2, 3, 2.0) == pytest.approx(2 / (2 + 1.2 * (0.25 + 0.75 * 1.5)), rel=1e-12)
    with pytest.raises(ValueError):
        lucene_idf(4, 5)
    with pytest.raises(ValueError, match="--b"):
        lucene_term_score(1.0, 1, 1, 1.0, b=1.5)


@pytest.fixture(scope="module")
def hand_corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("hand")
    corpus = write(root / "c.txt", ["a b", "A a c", "b", ""])  # an empty line is document 3, never scored
    build_index(str(corpus), str(root / "idx"), Analyser(), 1.2, 0.75, progress=False)
    build_index(str(corpus), str(root / "sharded"), Analyser(), 1.2, 0.75, progress=False, corpus_shards=2)
    return root


@pytest.mark.parametrize("backend", ["bm25s", "bm25s, 2 corpus shards", "rank_bm25"])
def test_both_backends_score_the_hand_computed_lucene_bm25(hand_corpus, backend):
    # N = 3 documents with a token, avgdl = 2, n_a = 2: idf = ln(1 + 1.5 / 2.5)
    idf = math.log(1.6)
    expected = [idf * 1 / (1 + 1.2 * (0.25 + 0.75 * 2 / 2)), idf * 2 / (2 + 1.2 * (0.25 + 0.75 * 3 / 2)), 0, 0]
    searcher = {"bm25s": lambda: Bm25sSearcher(str(hand_corpus / "idx"), Analyser()),
                "rank_bm25": lambda: RankBm25Searcher(str(hand_corpus / "c.txt"), Analyser(), 1.2, 0.75, progress=False),
                # shard 1 holds "b" and the empty line: its postings are scored with the whole corpus's N and avgdl
                "bm25s, 2 corpus shards": lambda: open_bm25s(str(hand_corpus / "sharded"), Analyser())}[backend]()
    np.testing.assert_allclose(searcher.scores("a"), expected, rtol=1e-6)
    docs, _ = searcher.search("a a", 5)  # a repeated query token counts twice; only matches come back
    assert docs.tolist() == [1, 0]
    assert len(searcher.search("zebra", 5)[0]) == 0


def test_top_k_breaks_ties_by_the_lower_line_and_keeps_only_matches():
    scores = np.array([0.0, 2.0, 1.0, 2.0, 1.0, 1.0, 0.0])
    docs, values = top_k(scores, 4)
    assert docs.tolist() == [1, 3, 2, 4] and values.tolist() == [2.0, 2.0, 1.0, 1.0]
    assert top_k(scores, 10)[0].tolist() == [1, 3, 2, 4, 5]
    with pytest.raises(ValueError, match="--top-k"):
        top_k(scores, 0)


def random_corpus(rng, n_docs, vocab):
    """Zipf-like words, many duplicated documents (exact ties) and some empty lines."""
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    docs = [" ".join(f"w{i}" for i in rng.choice(vocab, size=rng.integers(0, 9), p=p)) for _ in range(n_docs)]
    for i in rng.choice(n_docs, size=n_docs // 5, replace=False):  # a fifth are copies of another line
        docs[i] = docs[rng.integers(n_docs)]
    return docs, p


def corpus_and_queries(tmp_path, seed: int, n_docs: int, vocab: int, n_queries: int):
    """``(corpus, queries)`` files: a :func:`random_corpus` and queries of 3 of its words, drawn as they are."""
    rng = np.random.default_rng(seed)
    docs, p = random_corpus(rng, n_docs, vocab)
    corpus = write(tmp_path / "c.txt", docs)
    return corpus, write(tmp_path / "q.txt", [" ".join(f"w{i}" for i in rng.choice(vocab, size=3, p=p))
                                              for _ in range(n_queries)])


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_backends_give_the_same_top_k_and_scores_on_random_corpora_with_ties(tmp_path, seed):
    rng = np.random.default_rng(seed)
    docs, p = random_corpus(rng, 1500, 60)
    corpus = write(tmp_path / "c.txt", docs)
    build_index(str(corpus), str(tmp_path / "idx"), Analyser(), 1.2, 0.75, chunk_docs=211, progress=False)
    fast = Bm25sSearcher(str(tmp_path / "idx"), Analyser())
    reference = RankBm25Searcher(str(corpus), Analyser(), 1.2, 0.75, progress=False)
    tied_lists = 0
    for _ in range(60):
        query = " ".join(f"w{i}" for i in rng.choice(60, size=rng.integers(1, 5), p=p))
        np.testing.assert_allclose(fast.scores(query), reference.scores(query), rtol=2e-6, atol=1e-7)
        a, b = fast.search(query, 25), reference.search(query, 25)
        assert a[0].tolist() == b[0].tolist(), query
        tied = np.diff(a[1]) == 0
        tied_lists += bool(tied.any())
        assert np.all(np.diff(a[0])[tied] > 0)  # equal scores: lower line first
    assert tied_lists > 10  # the comparison covered ties


@pytest.mark.parametrize("seed", [0, 1])
def test_postings_scoring_is_the_dense_top_k_exactly(tmp_path, seed):
    """search() sums the query terms' postings (no new vector of one float per document per query): the same
    documents, order and float32 scores, bit for bit, as top_k over the dense scores, ties and repeated
    terms included."""
    rng = np.random.default_rng(seed)
    docs, p = random_corpus(rng, 1500, 60)
    build_index(str(write(tmp_path / "c.txt", docs)), str(tmp_path / "idx"), Analyser(), 1.2, 0.75, chunk_docs=300,
                progress=False)
    searcher = Bm25sSearcher(str(tmp_path / "idx"), Analyser(), maxscore=False)  # the paths without MaxScore
    tied, ranked_whole = 0, 0
    for _ in range(80):
        query = " ".join(f"w{i}" for i in rng.choice(60, size=rng.integers(1, 6), p=p))  # repeats: counted twice
        dense = searcher.scores(query)
        ranked_whole += searcher.postings.count(searcher.term_ids(query)) > searcher.DENSE_SHARE * searcher.num_docs
        for k in (1, 10, 2000):
            sparse_docs, sparse_scores = searcher.search(query, k)
            dense_docs, dense_scores = top_k(dense, k)
            assert sparse_docs.tolist() == dense_docs.tolist(), query
            assert sparse_scores.dtype == dense_scores.dtype and np.array_equal(sparse_scores, dense_scores), query
        tied += bool((np.diff(searcher.search(query, 25)[1]) == 0).any())
        for k in (1, 10, 2000):  # the postings alone, whatever their number
            assert all(np.array_equal(a, b) for a, b in zip(searcher.postings.top_k(searcher.term_ids(query), k),
                                                            top_k(dense, k)))
        docs, scores = searcher.postings.postings(searcher.term_ids(query))
        assert np.array_equal(np.unique(docs), np.flatnonzero(dense)) and np.array_equal(scores, dense[docs])
        assert not searcher.postings.sums.any()  # reset for the next query
    assert tied > 10 and 10 < ranked_whole < 70  # ties, and both ways of ranking (postings alone, whole vector)
    with pytest.raises(ValueError, match="--top-k"):
        searcher.search("w1", 0)


@pytest.mark.parametrize("seed", [0, 1])
def test_corpus_shards_with_global_statistics_give_the_one_index_top_k(tmp_path, seed):
    """K = 1 to 4 index shards (each scored with the whole corpus's N, document frequencies and average
    length; every shard asked; top-k lists merged by score, then document): the one-index documents, order
    and float32 scores, bit for bit, ties included."""
    rng = np.random.default_rng(seed)
    docs, p = random_corpus(rng, 1201, 60)  # 1201: no K of 2 to 4 divides it
    corpus = str(write(tmp_path / "c.txt", docs))
    one = build_index(corpus, str(tmp_path / "one"), Analyser(), 1.2, 0.75, chunk_docs=97, progress=False)
    whole = Bm25sSearcher(str(tmp_path / "one"), Analyser())
    queries = [" ".join(f"w{i}" for i in rng.choice(60, size=rng.integers(1, 6), p=p)) for _ in range(60)]
    for shards in (1, 2, 3, 4):
        index = str(tmp_path / f"k{shards}")
        manifest = build_index(corpus, index, Analyser(), 1.2, 0.75, chunk_docs=97, progress=False,
                               corpus_shards=shards)
        assert manifest["postings"] == one["postings"] and manifest["avgdl"] == one["avgdl"]
        searcher = open_bm25s(index, Analyser())
        assert isinstance(searcher, ShardedSearcher) == (shards > 1) and searcher.num_docs == 1201
        tied = 0
        for query in queries:
            assert np.array_equal(searcher.scores(query), whole.scores(query)), query
            for k in (1, 10, 25, 2000):
                (a, x), (b, y) = searcher.search(query, k), whole.search(query, k)
                assert a.tolist() == b.tolist() and x.dtype == y.dtype and np.array_equal(x, y), (shards, query, k)
            tied += bool((np.diff(searcher.search(query, 25)[1]) == 0).any())
        assert tied > 10  # the comparison covered ties
    assert [s["documents"] for s in manifest["shards"]] == [300, 300, 300, 301]


def test_retrieve_with_corpus_shards_writes_the_one_index_outputs_and_reuses_only_its_own(tmp_path, capsys):
    corpus, queries = corpus_and_queries(tmp_path, 7, 400, 40, 30)
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "one"), "--top-k", "7", out="a") == 0
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "three"), "--top-k", "7",
                   "--corpus-shards", "3", out="b") == 0
    assert "in 3 corpus shards" in capsys.readouterr().err
    for name in ("provenance.tsv", "retrieved.txt", "retrieved.ids"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["index"]["corpus_shards"] == 3
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "three"), "--corpus-shards", "2", out="c") == 2
    assert "built with a different corpus_shards" in capsys.readouterr().err
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "one"), "--corpus-shards", "3", out="c") == 2
    assert "built with a different corpus_shards" in capsys.readouterr().err
    (tmp_path / "three" / "shard1" / "block_last.npy").write_bytes(b"")  # a shard's file cut short
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "three"), "--corpus-shards", "3", out="c") == 2
    assert "shard1/block_last.npy" in capsys.readouterr().err


def test_pass_one_in_processes_writes_the_one_process_index(tmp_path):
    """Pass 1 in 1, 2 and 3 forked processes (each a range of lines with its own vocabulary, merged in order and
    the chunks renumbered): every index file the one-process build's bytes, nothing of the workers left."""
    docs, _ = random_corpus(np.random.default_rng(9), 701, 40)
    docs[5] = docs[300] = ""  # empty lines inside the ranges
    corpus = str(write(tmp_path / "c.txt", docs + ["a word only the last range holds"]))
    one = build_index(corpus, str(tmp_path / "w1"), Analyser(), 1.2, 0.75, chunk_docs=50, progress=False)
    for workers in (2, 3):
        many = build_index(corpus, str(tmp_path / f"w{workers}"), Analyser(), 1.2, 0.75, chunk_docs=50,
                           progress=False, workers=workers)
        assert many["terms"] == one["terms"] and many["postings"] == one["postings"]
        files = sorted(p.name for p in (tmp_path / f"w{workers}").iterdir())
        assert files == sorted(p.name for p in (tmp_path / "w1").iterdir())
        for name in set(files) - {"maskplug_index.json"}:
            assert (tmp_path / f"w{workers}" / name).read_bytes() == (tmp_path / "w1" / name).read_bytes(), name


#: pieces of the mixed texts: ASCII words in every case, digits, underscores, punctuation, ASCII and Unicode
#: whitespace, accented and non-Latin words, characters whose lower case is longer (İ) or context-dependent (Σ),
#: a combining mark, an emoji
MIXED = ["Word", "word", "WORD", "w0rd", "x_y", "__", "3.5", "don't", "a-b", "!!", "\t", "\r", "\x0b", "\x1c",
         "\u00a0", "\u2028", "Café", "café", "naïve", "ẞtraße", "İstanbul", "ΟΔΟΣ", "東京", "e\u0301t", "🙂", "Ω"]


def mixed_texts(rng, n_docs):
    """Documents of MIXED pieces (joined by spaces or nothing), a tenth empty, some wholly ASCII."""
    docs = []
    for _ in range(n_docs):
        pieces = [MIXED[i] for i in rng.integers(0, len(MIXED) if rng.random() < 0.5 else 16, rng.integers(0, 12))]
        docs.append("".join(p + (" " if rng.random() < 0.7 else "") for p in pieces) if rng.random() > 0.1 else "")
    return docs


@pytest.mark.skipif(not word_kernel.AVAILABLE, reason="the compiled pass 1 needs numba")
@pytest.mark.parametrize("seed,lowercase", [(0, True), (1, False), (2, True)])
def test_compiled_pass_one_gives_the_python_loops_vocabulary_lengths_and_postings(tmp_path, monkeypatch, seed,
                                                                                 lowercase):
    """The kernel (ASCII documents split there, the others by the analyser) against the Python loop on mixed
    text, chunks of 37 documents: the same terms in the same order, document frequencies, lengths and chunk
    postings, byte for byte."""
    from fairseq_maskplug.retrieval.index import analyse_chunks

    docs = mixed_texts(np.random.default_rng(seed), 400)
    analyser = Analyser(lowercase=lowercase)
    assert word_kernel.applies_to(analyser) and not word_kernel.applies_to(Analyser(stopwords=frozenset({"a"})))
    (tmp_path / "kernel").mkdir()
    (tmp_path / "loop").mkdir()
    compiled = analyse_chunks(iter(docs), 5, analyser, 37, str(tmp_path / "kernel"), False, "")
    monkeypatch.setattr(word_kernel, "AVAILABLE", False)
    loop = analyse_chunks(iter(docs), 5, analyser, 37, str(tmp_path / "loop"), False, "")
    assert list(compiled[0].items()) == list(loop[0].items()) and len(loop[0]) > 20
    assert np.array_equal(compiled[1], loop[1]) and compiled[1].dtype == loop[1].dtype
    assert np.array_equal(compiled[2], loop[2]) and compiled[2].dtype == loop[2].dtype
    assert [held for _, held in compiled[3]] == [held for _, held in loop[3]] and len(loop[3]) == 11
    for (a, _), (b, _) in zip(compiled[3], loop[3]):
        assert open(a, "rb").read() == open(b, "rb").read()


@pytest.mark.skipif(not word_kernel.AVAILABLE, reason="the compiled pass 1 needs numba")
def test_the_kernels_term_table_grows_and_keeps_every_term_apart(tmp_path):
    """A table of 2 slots and 1 byte grows (rehashing every term) while three blocks are interned: the ids are
    the order of first appearance over the blocks, each document's tokens its analysed tokens."""
    rng = np.random.default_rng(4)
    table = word_kernel.TermTable(slots=2, term_bytes=1)
    vocab = {}
    for block in range(3):
        docs = mixed_texts(rng, 150) + [" ".join(f"t{i}" for i in range(block * 3000, block * 3000 + 3000))]
        ids, lengths, _ = word_kernel.analyse(docs, table, Analyser(), 0)
        expected = [vocab.setdefault(token, len(vocab)) for doc in docs for token in Analyser().tokens(doc)]
        assert ids.tolist() == expected and lengths.tolist() == [len(Analyser().tokens(doc)) for doc in docs]
    assert table.strings() == list(vocab) and len(table.slots) >= 2 * len(vocab) > 18000
    with pytest.raises(ValueError, match="power of two"):
        word_kernel.TermTable(slots=3)


def test_chunked_index_equals_a_single_chunk_index(tmp_path):
    docs, _ = random_corpus(np.random.default_rng(5), 700, 40)
    corpus = write(tmp_path / "c.txt", docs)
    one = build_index(str(corpus), str(tmp_path / "one"), Analyser(), 1.2, 0.75, chunk_docs=10 ** 6, progress=False)
    many = build_index(str(corpus), str(tmp_path / "many"), Analyser(), 1.2, 0.75, chunk_docs=37, progress=False)
    assert one["postings"] == many["postings"] and one["documents"] == 700
    files = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "many").iterdir()) and "postings.u32" in files
    for name in files:  # the same bytes, the temporary term-major arrays removed
        same = (tmp_path / "one" / name).read_bytes() == (tmp_path / "many" / name).read_bytes()
        assert same or name == "maskplug_index.json", name
    assert not [name for name in files if "tmp" in name]


def test_compressed_postings_give_back_every_document_frequency_and_score(tmp_path):
    """retrieval/postings.py: documents and term frequencies packed in blocks (gaps of 0 to 2**31 - 2, term
    frequencies to 2**20, terms of 0 to 700 postings, blocks of 1, 5 and 128, written in parts) come back
    exactly; each posting's score is lucene_term_score's float rounded to float32 once (the float the
    previous format stored), and each block's stored maximum is the largest of its scores."""
    from fairseq_maskplug.retrieval import postings

    rng = np.random.default_rng(11)
    terms, documents = 40, 2 ** 31 - 1
    lists = [np.sort(rng.choice(documents, size=int(rng.integers(0, 700)), replace=False)) for _ in range(terms)]
    lists[3] = np.arange(500, 800)  # consecutive documents: gaps of 0 bits
    lists[4] = np.array([0, documents - 1])
    freqs = [rng.geometric(0.4, len(d)) if t % 4 else rng.integers(1, 2 ** 20, len(d)) for t, d in enumerate(lists)]
    freqs[5] = np.ones(len(lists[5]), dtype=np.int64)
    length_of = lambda docs: (docs % 251 + 1).astype(np.int32)  # noqa: E731 (a length for any document id)
    idf = rng.random(terms) * 6 + 0.01
    counts = np.array([len(d) for d in lists])
    indptr = np.concatenate([[0], np.cumsum(counts)])
    for block in (1, 5, 128):
        directory = tmp_path / f"b{block}"
        directory.mkdir()

        def parts():
            for lo in range(0, terms, 7):
                docs, tf = np.concatenate(lists[lo:lo + 7]), np.concatenate(freqs[lo:lo + 7])
                scores = postings.posting_scores(np.repeat(idf[lo:lo + 7], counts[lo:lo + 7]), tf, length_of(docs),
                                                 120.5, 1.2, 0.75)
                yield docs, tf, counts[lo:lo + 7], scores

        # the document lengths of the index: only those of documents it holds are read here
        postings.write(str(directory), parts(), indptr, idf, np.zeros(0, np.int32), {}, block)
        index = postings.Postings(str(directory), {"k1": 1.2, "b": 0.75, "avgdl": 120.5, "block": block})
        for t in range(terms):
            docs, tf = index.decode(t)
            assert np.array_equal(docs, lists[t]) and np.array_equal(tf, freqs[t]), (block, t)
            want = lucene_term_score(idf[t], tf, length_of(docs), 120.5, 1.2, 0.75)
            scores = postings.posting_scores(idf[t], tf, length_of(docs), 120.5, 1.2, 0.75)
            assert scores.dtype == np.float32 and np.array_equal(scores, want.astype(np.float32))
            first, last = index.term_block[t], index.term_block[t + 1]
            maxima = [scores[i:i + block].max() for i in range(0, len(scores), block)]
            assert np.array_equal(index.block_max[first:last], np.array(maxima, dtype=np.float32)), (block, t)
            assert np.array_equal(index.block_last[first:last], docs[np.minimum(
                np.arange(block, len(docs) + block, block), len(docs)) - 1]), (block, t)
    with pytest.raises(ValueError, match="strictly ascending"):
        postings.encode(np.array([3, 3]), np.array([1, 1]), [2], np.zeros(2, np.float32))


def test_an_index_of_the_previous_format_is_refused_in_one_line(tmp_path, capsys):
    corpus = write(tmp_path / "c.txt", ["red apple pie", "green apple"])
    queries = write(tmp_path / "q.txt", ["apple"])
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "idx")) == 0
    manifest = json.loads((tmp_path / "idx" / "maskplug_index.json").read_text())
    (tmp_path / "idx" / "maskplug_index.json").write_text(json.dumps(dict(manifest, format=1)))
    capsys.readouterr()
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "idx"), out="again") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("is in index format 1 of an earlier version (this version reads format 2: compressed "
                            "postings); remove the --index directory to rebuild it (or copy it again)"), err


def test_rake_ranks_phrases_by_degree_over_frequency():
    text = "Compatibility of systems of linear constraints over the set of natural numbers. Linear constraints, again!"
    # linear, constraints, natural, numbers: degree/frequency 2; the single words: 1
    assert rake_phrases(text) == ["natural numbers", "linear constraints", "linear constraints", "systems", "set",
                                  "compatibility"]
    assert rake_query(text, top=3) == "natural numbers linear constraints linear constraints"
    assert rake_query("the of and") == ""


def index_files(index):
    """Every file of an index, by path, and its manifest without the build time."""
    files = {str(p.relative_to(index)): p.read_bytes() for p in sorted(index.rglob("*"))
             if p.is_file() and p.name != "maskplug_index.json"}
    manifest = json.loads((index / "maskplug_index.json").read_text())
    manifest.pop("build_seconds")
    return files, manifest


def test_corpus_shards_built_by_separate_jobs_are_the_one_process_index(tmp_path, capsys):
    """1,201 documents (some empty) in 2 and 3 corpus shards, each built by its own job, run twice (statistics,
    then postings; the last assembles), chunks of 50 documents: every index file and the manifest are those of
    one process building the same shards; a job killed after its postings (no marker) reruns alone, one killed
    while assembling leaves nothing lost; statistics made with other settings are refused in one line."""
    rng = np.random.default_rng(11)
    docs, _ = random_corpus(rng, 1201, 300)
    docs[7] = docs[600] = ""
    corpus = write(tmp_path / "c.txt", docs)
    build = ["--corpus", str(corpus), "--chunk-docs", "50"]
    for shards in (2, 3):
        assert retrieve_main([*build, "--index", str(tmp_path / f"one{shards}"), "--corpus-shards", str(shards)]) == 0
        index = tmp_path / f"jobs{shards}"
        job = [*build, "--index", str(index), "--corpus-shards", str(shards), "--build-shard"]
        for shard in range(shards):  # first runs: statistics (the last job goes on to its postings)
            assert retrieve_main([*job, str(shard)]) == 0
        assert "not written theirs" in capsys.readouterr().err and not index.exists()
        for shard in range(shards - 1):  # second runs: postings; the last of them assembles
            if shard == shards - 2 and shards == 2:  # a job killed while assembling had moved shard 1 away
                os.makedirs(f"{index}.tmp-999999999")
                os.rename(f"{index}.parts/shard1", f"{index}.tmp-999999999/shard1")
            assert retrieve_main([*job, str(shard)]) == 0
            if shards == 3 and shard == 0:  # killed before its marker: its rerun builds it again
                os.remove(f"{index}.parts/built.shard0-of-3.json")
                assert retrieve_main([*job, str(shard)]) == 0
        err = capsys.readouterr().err
        assert "statistics are written already: skipped" in err and "is whole: 1201 documents" in err
        assert index_files(index) == index_files(tmp_path / f"one{shards}")
        assert not os.path.exists(f"{index}.parts") and not list(tmp_path.glob("*.tmp-*"))
        assert retrieve_main([*job, "0"]) == 0  # a whole index: reused
        assert "reusing the index" in capsys.readouterr().err
    job = [*build, "--index", str(tmp_path / "other"), "--corpus-shards", "2", "--build-shard", "0"]
    assert retrieve_main(job) == 0
    assert retrieve_main([*job, "--k1", "1.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "made with other options or inputs" in err[-1] and err[-1].startswith("error: ")
    with pytest.raises(SystemExit):
        retrieve_main([*build, "--index", str(tmp_path / "x"), "--build-shard", "0"])
    assert "--build-shard 0 needs --corpus-shards K > 1" in capsys.readouterr().err


@pytest.mark.e2e
@pytest.mark.full
def test_two_torchrun_ranks_build_the_corpus_shards_and_answer_the_queries(tmp_path):
    from fairseq_helpers import BIN, check, run

    corpus, queries = corpus_and_queries(tmp_path, 12, 700, 60, 21)
    args = ["--corpus", corpus, "--queries", queries, "--top-k", "9", "--workers", "1", "--corpus-shards", "2",
            "--chunk-docs", "64"]
    check(run([BIN / "fairseq-maskplug-retrieve", *args, "--index", tmp_path / "one", "--out", tmp_path / "a"]))
    result = check(run([BIN / "torchrun", "--standalone", "--nproc-per-node", "2", BIN / "fairseq-maskplug-retrieve",
                        *args, "--index", tmp_path / "ranks", "--out", tmp_path / "b"], timeout=600))
    assert "is whole" in result.stderr
    assert index_files(tmp_path / "ranks") == index_files(tmp_path / "one")
    assert outputs(tmp_path / "b") == outputs(tmp_path / "a")


def run_cli(tmp_path, corpus, queries, *extra, out="out"):
    return retrieve_main(["--corpus", str(corpus), "--queries", str(queries), "--out", str(tmp_path / out),
                          *extra])


def test_outputs_union_provenance_and_unmatched_queries(tmp_path, capsys):
    corpus = write(tmp_path / "c.txt", ["red apple pie", "green apple", "red car", "blue sky", "red apple pie"])
    queries = write(tmp_path / "q.txt", ["apple", "red", "unknown words"])
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "idx"), "--top-k", "2") == 0
    assert "1 of 3 queries match no document" in capsys.readouterr().err
    out = tmp_path / "out"
    rows = [line.split("\t") for line in (out / "provenance.tsv").read_text().splitlines()]
    assert rows[0] == ["query", "rank", "doc", "score"]
    # "apple": green apple (shorter) first, then the first red apple pie; "red": red car, then line 0
    assert [r[:3] for r in rows[1:]] == [["0", "1", "1"], ["0", "2", "0"], ["1", "1", "2"], ["1", "2", "0"]]
    assert (out / "retrieved.ids").read_text().split() == ["0", "1", "2"]  # union, de-duplicated, corpus order
    assert (out / "retrieved.txt").read_text().splitlines() == ["red apple pie", "green apple", "red car"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["queries_without_match"] == 1 and summary["unmatched_query_lines"] == [3]
    assert summary["documents_retrieved"] == 3 and summary["rows"] == 4
    # the reference backend writes the same rows
    assert run_cli(tmp_path, corpus, queries, "--backend", "rank_bm25", "--top-k", "2", out="ref") == 0
    ref = [line.split("\t") for line in (tmp_path / "ref" / "provenance.tsv").read_text().splitlines()]
    assert [r[:3] for r in ref] == [r[:3] for r in rows]
    # a second task reuses the index; a changed corpus is refused
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "idx"), out="again") == 0
    assert "files checked by length, not content: --verify-data hashes them" in capsys.readouterr().err
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "idx"), "--verify-data", out="again") == 0
    assert "every file's SHA-256 checked" in capsys.readouterr().err
    write(corpus, ["something else"])
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "idx"), out="x") == 2
    assert "built with a different corpus content" in capsys.readouterr().err


def test_a_rerun_keeps_the_files_the_user_put_in_out(tmp_path):
    """The TLM page has the user write the BPE-encoded documents into --out: an identical rerun (and one with
    other options) replaces retrieve's own files and keeps that one."""
    corpus = write(tmp_path / "c.txt", ["red apple pie", "green apple", "red car", "blue sky"])
    queries = write(tmp_path / "q.txt", ["apple", "red"])
    index = ["--index", str(tmp_path / "idx")]
    assert run_cli(tmp_path, corpus, queries, *index, "--top-k", "2") == 0
    (tmp_path / "out" / "retrieved.bpe").write_text("mine\n")
    (tmp_path / "out" / "notes").mkdir()
    (tmp_path / "out" / "notes" / "n.txt").write_text("also mine\n")
    for extra in ([], ["--top-k", "1"]):
        assert run_cli(tmp_path, corpus, queries, *index, "--top-k", "2", *extra) == 0
        assert (tmp_path / "out" / "retrieved.bpe").read_text() == "mine\n"
        assert (tmp_path / "out" / "notes" / "n.txt").read_text() == "also mine\n"
    assert (tmp_path / "out" / "retrieved.ids").read_text().split() == ["1", "2"]  # the last run's (top 1)


def test_a_second_run_into_a_locked_out_is_refused_naming_the_holder(tmp_path, capsys):
    """--out is written by one run at a time: while another process holds OUT.lock (as a run still going would),
    retrieve and select stop in one line naming it, and the output stays the first run's."""
    import subprocess
    import sys

    from fairseq_maskplug.common.locks import OutputLock
    from preprocess.select_dsir import main as select_main

    corpus = write(tmp_path / "c.txt", ["red apple pie", "green apple", "red car", "blue sky"])
    queries = write(tmp_path / "q.txt", ["apple", "red"])
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from fairseq_maskplug.common.locks import OutputLock\n"
                               f"lock = OutputLock({str(tmp_path / 'out')!r}, 'another run').__enter__()\n"
                               "print('held', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "idx")) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "another run (pid" in err[0], err
        assert select_main(["--corpus", str(corpus), "--target", str(queries), "--out", str(tmp_path / "out"),
                            "--num-docs", "2", "--buckets", "100"]) == 2
        assert "another run (pid" in capsys.readouterr().err
        assert not (tmp_path / "out").exists()
    finally:
        holder.kill()
        holder.wait()
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "idx")) == 0  # the lock left is stale


def test_rake_queries_through_the_command(tmp_path):
    corpus = write(tmp_path / "c.txt", ["natural numbers are fun", "linear algebra", "cooking"])
    queries = write(tmp_path / "q.txt", ["Compatibility of systems of linear constraints over natural numbers."])
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "idx"), "--rake", "--top-k", "5") == 0
    assert (tmp_path / "out" / "retrieved.ids").read_text().split() == ["0", "1"]


@pytest.mark.parametrize("case", ["empty corpus", "empty query line", "non-UTF-8 corpus", "non-UTF-8 queries"])
def test_bad_input_stops_naming_file_and_line(tmp_path, capsys, case):
    corpus = write(tmp_path / "c.txt", ["a b", "c d", "e f"])
    queries = write(tmp_path / "q.txt", ["a", "c"])
    expected = None
    if case == "empty corpus":
        corpus.write_text("")
        expected = f"{corpus}: the corpus is empty"
    elif case == "empty query line":
        write(queries, ["a", "  ", "c"])
        expected = f"{queries}:2: empty query line"
    elif case == "non-UTF-8 corpus":
        corpus.write_bytes(b"a b\nc d\ne \xff f\n")
        expected = f"{corpus}:3: not UTF-8"
    else:
        queries.write_bytes(b"\xc3\x28\n")
        expected = f"{queries}:1: not UTF-8"
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "idx")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and expected in err[-1], err
    assert not (tmp_path / "out").exists() and not (tmp_path / "idx").exists()
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]  # no half-built index left behind


def test_index_and_out_under_missing_parents_are_made_and_an_unwritable_one_is_refused_first(tmp_path, capsys):
    corpus = write(tmp_path / "c.txt", ["red apple pie", "green apple"])
    queries = write(tmp_path / "q.txt", ["apple"])
    assert run_cli(tmp_path, corpus, queries, "--index", str(tmp_path / "new" / "idx"), out="new/out") == 0
    assert (tmp_path / "new" / "out" / "retrieved.ids").read_text().split() == ["0", "1"]
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.access(locked, os.W_OK):  # running as root: permissions do not bind
        return
    assert run_cli(tmp_path, corpus, queries, "--index", str(locked / "a" / "idx"), out="other") == 2
    assert f"cannot write {locked / 'a' / 'idx'}" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()


def outputs(out):
    return {name: (out / name).read_bytes() for name in ("provenance.tsv", "retrieved.txt", "retrieved.ids")}


def test_query_shards_merged_write_the_one_process_output(tmp_path, capsys):
    """Queries in 2, 3 and 7 shards (7: more shards than the 5 queries, two of them empty), merged by
    merge-shards OUT: the one-process output byte for byte; a rerun skips a written part; a part made with
    other options and a missing shard are refused in one line."""
    from preprocess import merge_shards

    corpus, queries = corpus_and_queries(tmp_path, 3, 300, 30, 5)
    index = ["--index", str(tmp_path / "idx"), "--top-k", "9"]
    assert run_cli(tmp_path, corpus, queries, *index, out="one") == 0
    whole = outputs(tmp_path / "one")
    for shards in (2, 3, 7):
        out = f"k{shards}"
        for shard in range(shards):
            assert run_cli(tmp_path, corpus, queries, *index, "--num-shards", str(shards), "--shard-id", str(shard),
                           out=out) == 0
            assert f"merge-shards {tmp_path / out}" in capsys.readouterr().out
        assert not (tmp_path / out).exists()
        assert run_cli(tmp_path, corpus, queries, *index, "--num-shards", str(shards), "--shard-id", "1",
                       out=out) == 0
        assert "already written: skipped" in capsys.readouterr().out
        assert merge_shards.main([str(tmp_path / out)]) == 0
        assert outputs(tmp_path / out) == whole and not (tmp_path / f"{out}.shards").exists()
        assert json.loads((tmp_path / out / "summary.json").read_text())["queries"] == 5
    shard = ["--num-shards", "3", "--shard-id"]
    assert run_cli(tmp_path, corpus, queries, *index, *shard, "0", out="bad") == 0
    assert run_cli(tmp_path, corpus, queries, *index[:2], "--top-k", "4", *shard, "0", out="bad") == 2
    assert "was made with other options or inputs" in capsys.readouterr().err
    assert merge_shards.main([str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert "query shard 1 of 3" in err and "--num-shards 3 --shard-id 1" in err and len(err.splitlines()) == 1
    (tmp_path / "mine.shards").mkdir()
    (tmp_path / "mine.shards" / "notes.txt").write_text("not a part")  # a directory it did not make: never used
    assert run_cli(tmp_path, corpus, queries, *index, *shard, "0", out="mine") == 2
    assert "was not made by fairseq-maskplug-retrieve" in capsys.readouterr().err
    assert (tmp_path / "mine.shards" / "notes.txt").exists()


def test_a_corpus_edited_after_the_query_shards_is_refused_at_the_merge(tmp_path, capsys):
    """One line edited at the same length and modification time after both shards ran: the merge would write
    the edited text for a document BM25 weighed on the old one; it refuses, naming the corpus."""
    from preprocess import merge_shards

    corpus, queries = corpus_and_queries(tmp_path, 3, 200, 30, 7)
    job = ["--index", str(tmp_path / "idx"), "--top-k", "5", "--num-shards", "2", "--shard-id"]
    for shard in ("0", "1"):
        assert run_cli(tmp_path, corpus, queries, *job, shard, out="k2") == 0
    stat = os.stat(corpus)
    text = corpus.read_text().splitlines()
    text[0] = "".join("x" if c.isalpha() else c for c in text[0])  # same length
    corpus.write_text("\n".join(text) + "\n")
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    capsys.readouterr()
    assert merge_shards.main([str(tmp_path / "k2")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--corpus {corpus} changed after the query shards read it" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "k2").exists() and (tmp_path / "k2.shards").exists()


@pytest.mark.e2e
@pytest.mark.full
def test_two_torchrun_ranks_answer_their_queries_and_rank_0_writes_the_output(tmp_path):
    from fairseq_helpers import BIN, check, run

    corpus, queries = corpus_and_queries(tmp_path, 4, 500, 30, 41)
    args = ["--corpus", corpus, "--queries", queries, "--index", tmp_path / "idx", "--top-k", "9", "--workers", "1"]
    check(run([BIN / "fairseq-maskplug-retrieve", *args, "--out", tmp_path / "one"]))
    result = check(run([BIN / "torchrun", "--standalone", "--nproc-per-node", "2", BIN / "fairseq-maskplug-retrieve",
                        *args, "--out", tmp_path / "ranks"], timeout=600))
    assert "query shard 1 of 2" in result.stdout
    assert outputs(tmp_path / "ranks") == outputs(tmp_path / "one") and not (tmp_path / "ranks.shards").exists()


@pytest.mark.parametrize("seed", [0, 1])
def test_maxscore_gives_the_exhaustive_top_k_scores_and_ties_while_summing_few_documents(tmp_path, seed):
    """Block-max MaxScore (retrieval/maxscore.py, over the compressed postings) against top_k of the dense
    scores (numpy, retrieval/postings.py): the same documents, order and float32 scores, bit for bit, on random
    corpora (exact ties from copied lines, repeated query terms, queries of 1 to 40 terms, k from 1 to past the
    matches), for postings blocks of 1, 4 and 128 and windows from one document to all, and through the
    searcher's search(); and it sums in full far fewer documents than match long queries."""
    from fairseq_maskplug.retrieval.maxscore import MaxScore

    rng = np.random.default_rng(seed)
    vocab = 150
    docs, p = random_corpus(rng, 2500, vocab)
    docs = [d + " " + " ".join(f"w{i}" for i in rng.choice(vocab, size=rng.integers(0, 25), p=p)) for d in docs]
    corpus = str(write(tmp_path / "c.txt", docs))
    ways = []
    for block in (1, 4, 128):
        build_index(corpus, str(tmp_path / f"idx{block}"), Analyser(), 1.2, 0.75, chunk_docs=700, progress=False,
                    block=block)
        searcher = Bm25sSearcher(str(tmp_path / f"idx{block}"), Analyser())  # MaxScore at any size
        ways += [searcher.maxscore] + [MaxScore(searcher.index, window) for window in (1, 7, 10 ** 9)]
    assert Bm25sSearcher(str(tmp_path / "idx128"), Analyser(), maxscore=False).maxscore is None
    tied = summed = matched = 0
    for q in range(120):
        query = " ".join(f"w{i}" for i in rng.choice(vocab, size=rng.integers(1, 41), p=p))
        terms = searcher.term_ids(query)
        dense = searcher.postings.dense(terms)
        for k in (1, 10, 50, 3000):
            want = top_k(dense, k)
            got = ways[(q + k) % len(ways)].top_k(terms, k) if q % 5 else (*searcher.search(query, k), 0)
            assert got[0].tolist() == want[0].tolist(), (terms, k)
            assert got[1].dtype == want[1].dtype and np.array_equal(got[1], want[1]), (terms, k)
            if k == 10 and len(terms) >= 20 and q % 5:
                summed, matched = summed + got[2], matched + int((dense > 0).sum())
        tied += bool((np.diff(top_k(dense, 50)[1]) == 0).any())
    assert tied > 10  # the comparison covered ties
    assert 0 < summed < matched / 4  # it prunes: long queries summed a quarter of their matches at most
    very_long = " ".join(f"w{i}" for i in rng.choice(vocab, size=6000, p=p))  # a window cut to keep 32 MB
    got, want = searcher.search(very_long, 50), top_k(searcher.postings.dense(searcher.term_ids(very_long)), 50)
    assert got[0].tolist() == want[0].tolist() and np.array_equal(got[1], want[1])
    with pytest.raises(ValueError, match="--top-k"):
        ways[0].top_k([1], 0)


def test_a_search_pool_serves_every_call_with_the_one_process_results(tmp_path):
    """retrieve(pool=...) reuses one set of forked workers across calls (no processes started per call) and
    returns what one process returns, in query order; a pool forked with another searcher is refused."""
    from fairseq_maskplug.retrieval.run import SearchPool, retrieve

    rng = np.random.default_rng(3)
    docs, p = random_corpus(rng, 600, 50)
    build_index(str(write(tmp_path / "c.txt", docs)), str(tmp_path / "idx"), Analyser(), 1.2, 0.75, progress=False)
    searcher = Bm25sSearcher(str(tmp_path / "idx"), Analyser())
    queries = [" ".join(f"w{i}" for i in rng.choice(50, size=rng.integers(1, 9), p=p)) for _ in range(150)]
    alone = retrieve(searcher, queries, 7, progress=False, chunk=16)
    with SearchPool(searcher, 2) as pool:
        workers = {w.pid for w in pool.pool._pool}
        for _ in range(2):
            pooled = retrieve(searcher, queries, 7, progress=False, chunk=16, pool=pool)
            assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
                       for a, b in zip(alone.hits, pooled.hits)) and len(pooled.hits) == len(queries)
        assert {w.pid for w in pool.pool._pool} == workers  # the same processes served both calls
        other = Bm25sSearcher(str(tmp_path / "idx"), Analyser())
        with pytest.raises(ValueError, match="another searcher"):
            retrieve(other, queries, 7, progress=False, pool=pool)
