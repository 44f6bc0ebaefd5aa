"""`boolcl generate`: an LLM turns a corpus into AND / OR / NOT training examples (BoolQuestions, section 4).

One module per job, in the order data flows:

    corpus.py     load and check the passages (sample, BoolQuestions corpora, JSONL, folders)
    embed.py      encoder embeddings, through the shared embedding cache (boolcl.retrieval.cache)
    cluster.py    passage groups: agglomerative clustering (MS MARCO), page runs (NQ), docid prefix
    compose.py    draws (group, candidates, target) and the AND / OR / NOT labels
    prompts.py    the versioned prompts
    offline.py    llm.backend=offline: a rule-based stand-in, no network
    identity.py   which LLM answers, the run hash, the run-state file an identical rerun stops by
    process.py    one draw through the LLM: atomic questions, the Boolean rewrite, the check
    parse.py      LLM text -> one clean question / an answer verdict, with counted reasons
    filter.py     the cyclic-consistency filter (strict | positives | off)
    schedule.py   the ordered async scheduler: draws in flight, counted in draw order, deduplicated
    negatives.py  hard negatives mined with the retriever
    assemble.py   kept outcomes -> training examples with passage text and provenance
    report.py     counters, report JSON, terminal summary
    pipeline.py   run_generate(cfg) -> path of the examples JSONL

The LLM client and its answer cache are shared with other stages: boolcl/llm/client.py and
boolcl/llm/cache.py. The entry point is `boolcl.generate.pipeline.run_generate`.
"""
