"""`boolcl generate`: an LLM turns a corpus into AND / OR / NOT training examples (BoolQuestions, section 4).

One module per job, in the order data flows:

    corpus.py     load and check the passages (sample, BoolQuestions corpora, JSONL, folders)
    embed.py      encoder embeddings with an on-disk cache
    cluster.py    passage groups: agglomerative clustering (MS MARCO), page runs (NQ), docid prefix
    compose.py    draws (group, 2-3 candidates, target) and the AND / OR / NOT labels
    prompts.py    the versioned prompts
    llm.py        async OpenAI-compatible client: concurrency, retries, single flight, first-call gate
    cache.py      the answer cache (atomic files, keyed by everything that shapes an answer)
    offline.py    llm.backend=offline: a rule-based stand-in, no network
    parse.py      LLM text -> one clean question / an answer verdict, with counted reasons
    filter.py     the cyclic-consistency filter (strict | positives | off)
    negatives.py  hard negatives mined with the retriever
    report.py     counters, report JSON, terminal summary
    pipeline.py   run_generate(cfg) -> path of the examples JSONL

The entry point is `boolcl.generate.pipeline.run_generate`.
"""
