"""Every list of exclusion wordings in boolcl, in one place.

They differ on purpose, each for its reader, and the differences are stated beside them:
the rules must find where an exclusion lies (EXCLUSION_INFIX / EXCLUSION_PREFIX), and the
trainer composes label-free exclusion questions from the markers among them that join a clause
(COMPOSE_INFIX / COMPOSE_PREFIX); the
generator's answer check only asks whether a question contains any negation at all
(NEGATION_CUES, deliberately broad); the offline generator splits its own compositions
(OFFLINE_NOT_MARKERS, only what compose_not writes and its neighbours); and UNSEEN_WORDINGS
must share no marker with any exclusion list, because it measures how the recipe does on
exclusion words it never trained on (tests/test_words.py checks that).
"""
from __future__ import annotations

import re

# The rules (boolcl.logic.rules): exclusions after the kept part, longest first at any one position.
EXCLUSION_INFIX = sorted(["other than", "apart from", "aside from", "besides", "excluding", "except for", "except",
                     "rather than", "leaving aside", "leaving out", "unrelated to", "without",
                     "that has nothing to do with", "that have nothing to do with", "have nothing to do with",
                     "has nothing to do with", "have no connection to", "has no connection to",
                     "that are not", "that is not", "that aren't", "that isn't", "that weren't", "that were not",
                     "that don't", "that do not", "that doesn't", "that does not", "that never",
                     "are not", "aren't", "is not", "isn't", "were not", "weren't", "do not", "don't",
                     "does not", "doesn't", "never", "not"], key=len, reverse=True)
# ... and exclusions before it: "Besides X, which Y?"
PREFIX_MARKERS = ["besides", "other than", "apart from", "aside from", "except for", "excluding"]
EXCLUSION_PREFIX = re.compile(r"^(?:%s)\s+(?P<neg>[^,]+),\s*(?P<pos>.+)$" % "|".join(PREFIX_MARKERS), re.I)

# Decomposition distillation's composed questions (boolcl.train.decomposition.compose_questions): the
# rules' own markers that join a kept question to a dropped part as a clause, so the rules split each
# composed question back into the parts it was built from. Bare verb negations ("is not", "never")
# and "without" are left out: they negate the kept question's own verb rather than name something
# to drop; "that is not" and its kin stay, as in "a doctor that is not a surgeon".
COMPOSE_INFIX = [m for m in EXCLUSION_INFIX if not re.fullmatch(
    r"(?:is|are|were|do|does)(?: not|n't)|not|never|that never|without", m)]
COMPOSE_PREFIX = PREFIX_MARKERS

# The generator's consistency check (boolcl.generate.parse): does a text negate at all? Broader than
# the rules on purpose ("unlike", "lacking", "non-"): it only has to notice, not to split.
NEGATION_CUES = re.compile(
    r"\b(?:not|no|never|neither|nor|without|except|excluding|exclude|excludes|other than|apart from|aside from|"
    r"besides|rather than|instead of|unrelated|leaving (?:out|aside)|unlike|but for|save for|free of|"
    r"non|lacks?|lacking|avoid(?:s|ing)?|omit(?:ting)?)\b|n't\b|\bnon-", re.I)

# The offline generator (boolcl.generate.offline): where its own NOT compositions join the parts.
OFFLINE_NOT_MARKERS = re.compile(r"\b(other than|excluding|not counting|leaving out whatever answers|leaving out|apart from|"
                        r"aside from|except for|except|besides|but not|that is not|that are not|unrelated to)\b", re.I)

# scripts/reproduce/unseen_wordings.py: held-out wordings that none of the lists above (nor the sample) uses.
UNSEEN_WORDINGS = ["{keep}, disregarding {drop}?", "{keep}, omitting {drop}?", "{keep}, passing over {drop}?",
            "{keep}, but nothing about {drop}?", "{keep}, skipping {drop}?", "{keep}, with {drop} ruled out?"]
