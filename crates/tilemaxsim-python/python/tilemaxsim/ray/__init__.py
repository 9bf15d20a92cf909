"""`tilemaxsim.ray`: one corpus file searched by shards on a Ray cluster.

Each shard is a Ray actor holding documents `start..end` of a corpus file that every node can
read (shared storage), opened memory-mapped with `Corpus.load(path, documents=(start, end))`,
so actors on one node share the page cache. `ShardedSearcher` scatters each query batch to every
shard and merges their top-k on the driver. The merge is exact: a document in the global top-k
is in its own shard's top-k, and both orders put higher scores first and break ties to the
lower (global) index, as `Corpus.search` does. A shard that dies mid-search makes that search
raise `ShardError`, never return partial results; Ray restarts the actor (`max_restarts`) and
later searches are whole again. `tilemaxsim.ray.serve` serves the same over HTTP with Ray Serve.

`IndexSearcher` does the same for an index directory (`tilemaxsim.Index`): replicas that each
open it and search a share of every query batch, updated live through any of them.

    import ray, tilemaxsim.ray
    ray.init(address="auto")                    # or ray.init() for a cluster on this machine
    searcher = tilemaxsim.ray.ShardedSearcher("/shared/corpus.safetensors", shards=4, device="cuda")
    scores, index = searcher.search(Q, k=10)    # as Corpus.search: [A, k], global indices
    scores, ids = searcher.search_ids(Q, k=10)  # the corpus's document ids
    index = tilemaxsim.ray.IndexSearcher("/shared/my_index", replicas=2, device="cuda")
    index.search(Q, top_k=10)                   # as tilemaxsim.Index.search
    index.add(new_docs); index.delete([3, 7])   # seen by every replica's next search
"""

try:
    import ray as _ray  # noqa: F401 - checked here for a clear message
except ImportError as e:  # pragma: no cover - exercised only where ray is absent
    raise ImportError("tilemaxsim.ray needs Ray: pip install 'ray>=2.40'") from e

from ._index import IndexSearcher
from ._shards import Hits, PendingSearch, ShardedSearcher, ShardError, merge, plan_shards

__all__ = ["Hits", "IndexSearcher", "PendingSearch", "ShardError", "ShardedSearcher", "merge", "plan_shards"]
