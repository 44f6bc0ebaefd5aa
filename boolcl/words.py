"""Every list of exclusion wordings in boolcl, in one place.

They differ on purpose, each for its reader, and the differences are stated beside them:
the rules must find where an exclusion lies (EXCLUSION_INFIX / EXCLUSION_PREFIX); the
generator's answer check only asks whether a question contains any negation at all
(NEGATION_CUES, deliberately broad); the offline generator splits its own compositions
(OFFLINE_NOT_MARKERS, only what compose_not writes and its neighbours); the scope head's
practice wordings are defaults of config keys (SCOPE_TEMPLATES, and CONTRAST_TEMPLATES,
which join the same parts without excluding); and UNSEEN_WORDINGS
must share no marker with any exclusion list, because it measures how the recipe does on
exclusion words it never trained on (tests/test_words.py checks that). A contrast wording
may share a plain word with one ("with"): it teaches that word is not an exclusion.
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
EXCLUSION_PREFIX = re.compile(r"^(?:besides|other than|apart from|aside from|except for|excluding)\s+(?P<neg>[^,]+),\s*"
                         r"(?P<pos>.+)$", re.I)

# The generator's consistency check (boolcl.generate.parse): does a text negate at all? Broader than
# the rules on purpose ("unlike", "lacking", "non-"): it only has to notice, not to split.
NEGATION_CUES = re.compile(
    r"\b(?:not|no|never|neither|nor|without|except|excluding|exclude|excludes|other than|apart from|aside from|"
    r"besides|rather than|instead of|unrelated|leaving (?:out|aside)|unlike|but for|save for|free of|"
    r"non|lacks?|lacking|avoid(?:s|ing)?|omit(?:ting)?)\b|n't\b|\bnon-", re.I)

# The offline generator (boolcl.generate.offline): where its own NOT compositions join the parts.
OFFLINE_NOT_MARKERS = re.compile(r"\b(other than|excluding|not counting|leaving out whatever answers|leaving out|apart from|"
                        r"aside from|except for|except|besides|but not|that is not|that are not|unrelated to)\b", re.I)

# Defaults of train.scope.templates: the scope head's practice sentences (one {drop}, one {keep}/{keep_lc}).
SCOPE_TEMPLATES = [
    "{keep} other than {drop}?", "{keep}, apart from {drop}?", "{keep} aside from {drop}?",
    "{keep}, excluding {drop}?", "{keep}, but not {drop}?", "{keep} except {drop}?", "{keep}, except for {drop}?",
    "{keep}, leaving out {drop}?", "{keep} that have nothing to do with {drop}?", "{keep} that are not {drop}?",
    "{keep} without {drop}?", "{keep}, not counting {drop}?", "{keep}, setting aside {drop}?",
    "{keep} unrelated to {drop}?", "{keep}, ignoring {drop}?", "{keep} that don't involve {drop}?",
    "{keep}, with the exception of {drop}?", "{keep} rather than {drop}?", "{keep}, save for {drop}?",
    "{keep}, minus {drop}?", "{keep} that aren't about {drop}?", "{keep}, but leave out {drop}?",
    "{keep} that do not concern {drop}?", "{keep}, as long as it isn't {drop}?", "{keep}, and not {drop}?",
    "Besides {drop}, {keep_lc}?", "Apart from {drop}, {keep_lc}?", "Other than {drop}, {keep_lc}?",
    "Excluding {drop}, {keep_lc}?", "Setting aside {drop}, {keep_lc}?", "Not counting {drop}, {keep_lc}?",
    "{drop} aside, {keep_lc}?"
]

# Scope pooling's contrast sentences (train/scope.py): the same two parts joined by words that add or
# offer a choice instead of excluding. Every token of them is ordinary, so the head learns that the
# connective, not the shape "question, then a second clause", marks an exclusion; without them it
# marked part of 60% of the sample's held-out OR questions ("..., and which one ...") as excluded.
CONTRAST_TEMPLATES = [
    "{keep} and also {drop}?", "{keep}, and {drop}?", "{keep} or {drop}?", "{keep}, or else {drop}?",
    "{keep} as well as {drop}?", "{keep}, together with {drop}?", "{keep}, including {drop}?",
    "{keep} that also involve {drop}?", "{keep}, and which one is {drop}?", "{keep}, or which one is {drop}?",
    "{keep}, plus {drop}?", "{keep} along with {drop}?", "{keep} that are also {drop}?", "{keep} and is {drop}?",
    "{keep}, either that or {drop}?", "In addition to {drop}, {keep_lc}?", "Along with {drop}, {keep_lc}?",
    "As well as {drop}, {keep_lc}?",
    # minimal pairs of the exclusion templates: the same words less the negation
    "{keep} with {drop}?", "{keep} that are {drop}?", "{keep} that involve {drop}?", "{keep} related to {drop}?",
    "{keep} that are about {drop}?", "{keep} that concern {drop}?", "{keep} such as {drop}?",
    "{keep}, but also {drop}?", "{keep} that have to do with {drop}?", "{keep}, counting {drop}?",
    # clauses that give a cause, a time or an addition: with markers hidden (train.scope.hide_markers) the head
    # learns that a second clause can exclude and would mark these too; here they are ordinary
    "{keep} because of {drop}?", "{keep}, since {drop}?", "{keep} when {drop}?", "{keep} after {drop}?",
    "{keep} while {drop}?", "{keep}, in addition to {drop}?", "{keep} only for {drop}?", "{keep} due to {drop}?",
    "{keep} before {drop}?", "{keep} so that {drop}?"
]

# scripts/reproduce/unseen_wordings.py: held-out wordings that none of the lists above (nor the sample) uses.
UNSEEN_WORDINGS = ["{keep}, disregarding {drop}?", "{keep}, omitting {drop}?", "{keep}, passing over {drop}?",
            "{keep}, but nothing about {drop}?", "{keep}, skipping {drop}?", "{keep}, with {drop} ruled out?"]
