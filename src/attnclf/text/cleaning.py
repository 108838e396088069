"""The course's optional text cleaning, applied before tokenisation.

HTML line breaks are always turned into spaces (IMDB is full of ``<br />``);
accents are composed (Unicode NFC: "e" + a combining acute reads as "é", one
word however it was typed; runs saved before ``unicode_nfc`` read texts as
they came, and still do); lower-casing, punctuation removal, stop-word removal (scikit-learn's English
list) and lemmatisation (simplemma, whose data ships in its wheel) are opt-in.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from functools import lru_cache

from ..checks import true_or_false
from ..errors import AttnclfError

_HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_PUNCTUATION = re.compile(r"[^\w\s]", re.UNICODE)


def unicode_problem(text: str) -> str | None:
    """Why UTF-8 (and so the tokenizer) cannot carry ``text``, or None: half a surrogate pair, as JSON's
    ``"\\ud800"`` decodes to, is the only such string.

    >>> unicode_problem("fine"), unicode_problem("half a pair " + chr(0xD800))
    (None, 'not valid Unicode: a lone surrogate (U+D800) at character 12')
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"not valid Unicode: a lone surrogate (U+{ord(text[exc.start]):04X}) at character {exc.start}"
    return None


@dataclass(frozen=True)
class CleaningConfig:
    lowercase: bool = True
    strip_punctuation: bool = False
    remove_stopwords: bool = False
    lemmatize: bool = False
    unicode_nfc: bool = True

    def __post_init__(self) -> None:
        for name in ("lowercase", "strip_punctuation", "remove_stopwords", "lemmatize", "unicode_nfc"):
            # (frozen: the checked value, numpy's bool as a plain one that config.json takes, is set past it)
            object.__setattr__(self, name, true_or_false(getattr(self, name), f"cleaning {name}"))

    def to_dict(self) -> dict:
        return asdict(self)


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    try:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    except ImportError:  # an ONNX export can run without it, unless its run removed stop-words
        raise AttnclfError("this model removes stop-words (--remove-stopwords) with scikit-learn's list: "
                           "pip install scikit-learn") from None

    # Negations carry sentiment; dropping them would erase "not good".
    return frozenset(ENGLISH_STOP_WORDS - {"not", "no", "nor", "never", "but"})


def clean(text: str, config: CleaningConfig = CleaningConfig()) -> str:
    """Clean one text as ``config`` says.

    >>> clean("Great<br />film!", CleaningConfig(strip_punctuation=True))
    'great film'
    >>> clean("cafe\u0301") == clean("caf\u00e9") == "caf\u00e9"
    True
    """
    if config.unicode_nfc:
        text = unicodedata.normalize("NFC", text)
    text = _HTML_BREAK.sub(" ", text)
    if config.lowercase:
        text = text.lower()
    if config.strip_punctuation:
        text = _PUNCTUATION.sub(" ", text)
    if config.remove_stopwords or config.lemmatize:
        words = text.split()
        if config.lemmatize:
            try:
                import simplemma
            except ImportError:
                raise AttnclfError("this model lemmatises (--lemmatize) with simplemma: pip install simplemma") from None

            words = [simplemma.lemmatize(w, lang="en") for w in words]
        if config.remove_stopwords:
            stop = _stop_words()
            words = [w for w in words if w not in stop]
        text = " ".join(words)
    return " ".join(text.split())
