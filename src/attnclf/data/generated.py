"""Generated datasets for teaching: no files, same seed, same data.

- ``synthetic``: the case study's generator. Tokens are ids 1..199 written as
  words ``w1``..``w199``; a text of 5..32 tokens drawn from the upper half of
  the vocabulary is positive, from the lower half negative. 4,000 samples,
  the first 3,200 train, the last 800 test.
- ``toy-reversal``, ``toy-relative``, ``toy-both``: the course notebook's
  3-token sets, where a mean of embeddings cannot separate the classes
  (reversal), where positions alone cannot (relative order), and both. The
  course measures training loss on them, so test and validation are the
  training set itself.
- ``demo``: short English reviews in which negation and contrast decide the
  label ("not good", "good but boring"), so word order matters and attention
  maps show readable words.
- ``topics``: multi-label. Each text's label set is the topics whose words
  it contains (none, one or several of five); a text may also mention one
  word of a topic it is not about, so words alone do not decide perfectly.
"""

from __future__ import annotations

import random

from .base import Splits, TextDataset
from .registry import Source

SYNTHETIC_VOCAB = 200


def _train_then_test(texts: list[str], labels: list, names: list[str], n_train: int, name: str,
                     multi_label: bool = False) -> Splits:
    """The first ``n_train`` generated texts as the train split of dataset ``name``, the rest as its test split."""
    return Splits(
        train=TextDataset(texts[:n_train], labels[:n_train], names, "train", name, multi_label=multi_label),
        test=TextDataset(texts[n_train:], labels[n_train:], names, "test", name, multi_label=multi_label),
    )


def synthetic(n_samples: int = 4000, seed: int = 42, n_train: int = 3200) -> Splits:
    """The case study's synthetic set (token ids as words ``w<id>``).

    >>> splits = synthetic()
    >>> len(splits.train), len(splits.test), splits.train.label_names
    (3200, 800, ['negative', 'positive'])
    """
    rng = random.Random(seed)
    half = SYNTHETIC_VOCAB // 2
    texts, labels = [], []
    for _ in range(n_samples):
        length = rng.randint(5, 32)
        label = rng.randint(0, 1)
        low, high = (half, SYNTHETIC_VOCAB - 1) if label == 1 else (1, half - 1)
        texts.append(" ".join(f"w{rng.randint(low, high)}" for _ in range(length)))
        labels.append(label)
    return _train_then_test(texts, labels, ["negative", "positive"], n_train, "synthetic")


# The course notebook's datasets, token ids 0..4 written as words.
_REVERSAL = [([0, 1, 2], 1), ([2, 1, 0], 0), ([1, 3, 4], 1), ([4, 3, 1], 0)]
_RELATIVE = [([0, 1, 2], 1), ([0, 3, 2], 0), ([4, 3, 2], 1), ([4, 1, 2], 0)]
TOY_ORDER = {
    "reversal": _REVERSAL,
    "relative": _RELATIVE,
    "both": _RELATIVE + _REVERSAL,
}


def toy_order(kind: str) -> Splits:
    """One of the course's 3-token order datasets; every split is the training set.

    >>> toy_order("reversal").train.texts[:2]
    ['t0 t1 t2', 't2 t1 t0']
    """
    rows = TOY_ORDER[kind]
    texts = [" ".join(f"t{i}" for i in ids) for ids, _ in rows]
    labels = [label for _, label in rows]
    names = ["0", "1"]

    def split(name: str) -> TextDataset:
        return TextDataset(list(texts), list(labels), names, name, f"toy-{kind}")

    return Splits(train=split("train"), test=split("test"), validation=split("validation"))


_SUBJECTS = ["the movie", "this film", "the plot", "the acting", "the story",
             "the soundtrack", "the ending", "the cast", "the script", "the director"]
_POSITIVE = ["good", "great", "wonderful", "brilliant", "moving", "fun", "clever",
             "beautiful", "gripping", "charming"]
_NEGATIVE = ["bad", "boring", "dull", "awful", "terrible", "weak", "predictable",
             "clumsy", "tedious", "bland"]
_OPENERS = ["", "", "honestly", "overall", "i think", "to be fair", "frankly"]
_INTENSIFIERS = ["", "", "", "really", "very", "quite"]


def _clause(rng: random.Random, positive: bool, negated: bool) -> str:
    # A negated clause uses the opposite word, so "not boring" is positive.
    word = rng.choice(_NEGATIVE if positive == negated else _POSITIVE)
    adverb = rng.choice(_INTENSIFIERS)
    middle = "was not" if negated else "was"
    return " ".join(part for part in (rng.choice(_SUBJECTS), middle, adverb, word) if part)


def _review(rng: random.Random) -> tuple[str, int]:
    label = rng.randint(0, 1)
    positive = label == 1
    pattern = rng.random()
    if pattern < 0.35:  # plain: the words alone decide
        body = _clause(rng, positive, negated=False)
    elif pattern < 0.6:  # negated: "not boring" is positive
        body = _clause(rng, positive, negated=True)
    else:  # contrast: the clause after "but" decides, the first one says the opposite
        first = _clause(rng, not positive, negated=rng.random() < 0.3)
        last = _clause(rng, positive, negated=rng.random() < 0.3)
        body = f"{first} but {last}"
    opener = rng.choice(_OPENERS)
    return (f"{opener} {body}" if opener else body), label


def demo(n_train: int = 4000, n_test: int = 1000, seed: int = 7) -> Splits:
    """Generated English reviews where negation and contrast decide the label.

    >>> splits = demo()
    >>> len(splits.train), len(splits.test)
    (4000, 1000)
    """
    rng = random.Random(seed)
    rows = [_review(rng) for _ in range(n_train + n_test)]
    texts = [t for t, _ in rows]
    labels = [y for _, y in rows]
    return _train_then_test(texts, labels, ["negative", "positive"], n_train, "demo")


TOPIC_WORDS = {
    "food": ["recipe", "bread", "soup", "spices", "kitchen", "baking", "cheese", "dinner"],
    "music": ["guitar", "concert", "album", "melody", "drummer", "lyrics", "orchestra", "chorus"],
    "politics": ["election", "senate", "minister", "vote", "policy", "parliament", "campaign", "treaty"],
    "science": ["experiment", "molecule", "telescope", "theory", "laboratory", "physics", "genome", "data"],
    "sports": ["football", "goal", "coach", "tournament", "referee", "stadium", "athlete", "league"],
}
_FILLER = ["the", "a", "today", "people", "said", "new", "about", "with", "after", "some", "many", "report",
           "week", "again", "local", "story", "news", "and", "more", "than", "city", "one", "was", "very"]


def _topic_text(rng: random.Random) -> tuple[str, tuple[int, ...]]:
    present = tuple(i for i in range(len(TOPIC_WORDS)) if rng.random() < 0.3)
    words = [rng.choice(_FILLER) for _ in range(rng.randint(6, 14))]
    vocab = list(TOPIC_WORDS.values())
    for i in present:
        words += rng.sample(vocab[i], rng.randint(1, 2))
    absent = [i for i in range(len(vocab)) if i not in present]
    if absent and rng.random() < 0.15:  # a passing mention is not a topic
        words.append(rng.choice(vocab[rng.choice(absent)]))
    rng.shuffle(words)
    return " ".join(words), present


def topics(n_train: int = 2000, n_test: int = 500, seed: int = 11) -> Splits:
    """Generated multi-label news snippets: the label set is the topics a text is about.

    >>> splits = topics()
    >>> len(splits.train), splits.train.multi_label, splits.train.label_names[:2]
    (2000, True, ['food', 'music'])
    """
    rng = random.Random(seed)
    rows = [_topic_text(rng) for _ in range(n_train + n_test)]
    texts = [t for t, _ in rows]
    label_sets = [y for _, y in rows]
    return _train_then_test(texts, label_sets, list(TOPIC_WORDS), n_train, "topics", multi_label=True)


SOURCES = [
    Source("demo", "generated short reviews; negation and contrast decide the label",
           lambda dirs, seed: demo(), generated=True, num_classes=2),
    Source("topics", "generated multi-label snippets: the set of five topics a text is about",
           lambda dirs, seed: topics(), generated=True, num_classes=len(TOPIC_WORDS), multi_label=True),
    Source("synthetic", "the case study's token-id set: label by vocabulary half, 3,200/800",
           lambda dirs, seed: synthetic(), generated=True, num_classes=2),
    *[
        Source(f"toy-{kind}", f"the course's 3-token order set ({kind}); test = train",
               lambda dirs, seed, kind=kind: toy_order(kind), generated=True, tests_on_training=True,
               num_classes=2)
        for kind in TOY_ORDER
    ],
]
