"""BM25 retrieval of task-relevant documents from a general corpus (TLM, Yao et al. 2022, Sec. 3.1).

Layers: :mod:`.analysis` (the analyser and Lucene's BM25 formulas, pure), :mod:`.rake`
(RAKE keyphrase queries, pure), :mod:`.index` (a chunked build of the compressed, memory-mapped
postings of :mod:`.postings`; its pass 1 compiled in :mod:`.word_kernel`), :mod:`.maxscore` (block-max MaxScore, numba), :mod:`.search` (the two
backends and the tie-broken top-K), :mod:`.retrieve_command` and :mod:`.select_command` (the work of
``fairseq-maskplug-retrieve`` and ``fairseq-maskplug-select``; ``preprocess/retrieve.py`` and
``preprocess/select_dsir.py`` parse their options).
"""

from .analysis import Analyser, lucene_idf, lucene_term_score
from .rake import rake_phrases, rake_query
from .search import Bm25sSearcher, RankBm25Searcher, top_k

__all__ = ["Analyser", "lucene_idf", "lucene_term_score", "rake_phrases", "rake_query", "Bm25sSearcher",
           "RankBm25Searcher", "top_k"]
