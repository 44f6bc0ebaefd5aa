"""Baselines that need no training: the decomposed-query Boolean baseline (`boolcl decompose`).

- `grammar`: Boolean expressions over simple questions, a strict parser, LLM-output clean-up;
- `decompose`: question -> expression, by an LLM (with retry and fallback) or by rules (offline);
- `combine`: per-question retrieval and the hard (set) and soft (weighted) merges;
- `run`: end to end, results.json + run.trec per variant and a decomposition report.
"""
