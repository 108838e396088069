"""The course's optional text cleaning, applied before tokenisation.

HTML line breaks are always turned into spaces (IMDB is full of ``<br />``);
accents are composed (Unicode NFC: "e" + a combining acute reads as "é", one
word however it was typed), and Chinese and Japanese characters are each made
a word (``split_cjk``: their texts put no spaces between words), and
social-media posts can be read as tweet tokenizers read them (``social_media``,
off by default: URLs and mentions as placeholders, HTML entities as their
characters, each emoji a word, "sooooo" as "sooo"), and a Turkish "İ" lower-cases to "i" (``turkish_i``:
Python's lower() gives "i" + a combining dot); runs saved before a setting in
``CLEANING_ADDED`` read texts as they did, and still do.
Lower-casing is on by default; punctuation removal, stop-word removal (scikit-learn's English
list) and lemmatisation (simplemma, whose data ships in its wheel) are opt-in.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache
from html.entities import html5

from ..checks import true_or_false
from ..errors import AttnclfError, shown

_HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_PUNCTUATION = re.compile(r"[^\w\s]", re.UNICODE)  # (symbols too: emoji, #, @)
# The characters split_cjk makes words of: CJK ideographs, as BERT's basic tokenizer splits them (the unified ones,
# extension A, the compatibility ones, and planes 2 and 3, which Unicode keeps for ideographs), and kana, which BERT
# leaves to its word pieces: the word tokenizer has none, so "はとても" (particle and adverb) would stay one word few
# texts share. Each takes a voicing mark typed apart from it (U+3099-309A, halfwidth U+FF9E-FF9F). Hangul is written
# with spaces between words and keeps them; Thai splits into syllables, not letters, and is left as it is.
_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"
                  "\u3041-\u3098\u309b-\u30ff\u31f0-\u31ff\uff66-\uff9d][\u3099\u309a\uff9e\uff9f]*")
# What social_media reads a post's URLs and mentions as: one word each, as BERTweet's HTTPURL and @USER, since their
# paths and names are mostly seen once (read as <unk>) and the whitespace pre-tokenizer cut a URL into seven tokens.
URL_WORD, MENTION_WORD = "httpurl", "@user"
# An HTML entity as a post escapes one, semicolon and all ("&amp;", "&#64;"): html.unescape also reads a hundred legacy
# names without one, as browsers do, so that "this&nothing" read "this¬hing".
_ENTITY = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.IGNORECASE)
# (the "@" first, the look-behind after it: led by a look-behind, the search tried it at every character, 30x slower)
_MENTION = re.compile(r"@(?<![\w@]@)\w+")  # (not an e-mail address's: "bob@mail.com")
# An emoji as one word: a pictograph (or a flag's two regional indicators) with its skin tone, keycap or tag
# characters, and those it is joined to by U+200D (a family). The pre-tokenizer read a run of them, and punctuation
# before them ("!!😍😍"), as one token few posts share, and cut one at its U+FE0F (emoji style) or U+200D, which are
# word characters to it: those two are dropped, "❤️" reads as "❤".
_PICTOGRAPH = "[\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001f1e5\U0001f200-\U0001faff]"
_EMOJI_MODIFIERS = "[\ufe0f\u20e3\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f]*"
_EMOJI = re.compile(f"(?:[\U0001f1e6-\U0001f1ff]{{2}}|{_PICTOGRAPH}{_EMOJI_MODIFIERS}"
                    f"(?:\u200d{_PICTOGRAPH}{_EMOJI_MODIFIERS})*)")
# A letter or punctuation mark typed four or more times in a row, kept three times (NLTK TweetTokenizer's reduce_len):
# every stretching of "sooo" is one word; "so" and "sooo" still differ. Not digits: 1000000 is a number. (Any
# character matched, spaces, digits and "_" kept by _shortened: classes in the pattern made it 3-10x slower.)
_STRETCHED = re.compile(r"(.)\1\1\1+")

# Cleaning settings added since the first release, each with the value every run had before it: a run whose
# config.json lacks one read texts so, and goes on doing so (TokenizerConfig.from_dict, RunSettings.as_begun).
CLEANING_ADDED = {"unicode_nfc": False, "split_cjk": False, "social_media": False, "turkish_i": False}


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
    """What ``clean`` does to a text before tokenisation, each setting True or False (the module's docstring tells
    them); settings added since the first release are in ``CLEANING_ADDED``.

    >>> CleaningConfig(strip_punctuation=True).to_dict()["strip_punctuation"]
    True
    >>> CleaningConfig(lowercase="yes")
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: cleaning lowercase must be True or False, got 'yes'
    """

    lowercase: bool = True
    strip_punctuation: bool = False
    remove_stopwords: bool = False
    lemmatize: bool = False
    unicode_nfc: bool = True
    split_cjk: bool = True
    social_media: bool = False
    turkish_i: bool = True

    def __post_init__(self) -> None:
        for name in (setting.name for setting in fields(self)):
            # (frozen: the checked value, numpy's bool as a plain one that config.json takes, is set past it)
            object.__setattr__(self, name, true_or_false(getattr(self, name), f"cleaning {name}"))

    def to_dict(self) -> dict:
        return asdict(self)

    def __setstate__(self, state: dict) -> None:
        # One pickled before a setting of CLEANING_ADDED (inside a pickled estimator) lacks it, and would read the
        # class's default, the new behaviour: it takes the value it was trained with, as from_recorded gives.
        self.__dict__.update({**CLEANING_ADDED, **state})

    @classmethod
    def from_recorded(cls, recorded: dict) -> "CleaningConfig":
        """The cleaning a config.json records, a setting it lacks (added since) at the value runs had before it.

        >>> CleaningConfig.from_recorded({"lowercase": True}).split_cjk, CleaningConfig().split_cjk
        (False, True)
        """
        return cls(**{**CLEANING_ADDED, **recorded})

    def as_before(self, names: Sequence[str]) -> "CleaningConfig":
        """These settings with each of ``names`` (settings of ``CLEANING_ADDED``) at the value runs had before it.

        >>> CleaningConfig().as_before(["split_cjk"]).split_cjk
        False
        """
        return replace(self, **{name: CLEANING_ADDED[name] for name in names})

    def keyed(self) -> dict:
        """``to_dict`` as a cache key hashes it: without each setting of ``CLEANING_ADDED`` at the value runs had
        before it, so a key made then is made again, and a cache built then reused, while texts read the same.

        >>> CleaningConfig(split_cjk=False, unicode_nfc=False, social_media=False, turkish_i=False).keyed() == {
        ...     "lowercase": True, "strip_punctuation": False, "remove_stopwords": False, "lemmatize": False}
        True
        """
        return {name: value for name, value in self.to_dict().items()
                if name not in CLEANING_ADDED or value != CLEANING_ADDED[name]}


def added_since(recorded: dict) -> tuple[str, ...]:
    """The settings of ``CLEANING_ADDED`` that ``recorded`` (a cleaning as config.json, a checkpoint or pretrain.json
    holds it) has no value for: it was written before them.

    >>> added_since({"lowercase": True, "unicode_nfc": True})
    ('split_cjk', 'social_media', 'turkish_i')
    """
    return tuple(name for name in CLEANING_ADDED if name not in recorded)


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    try:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    except ImportError:  # an ONNX export can run without it, unless its run removed stop-words
        raise AttnclfError("this model removes stop-words (--remove-stopwords) with scikit-learn's list: "
                           "pip install scikit-learn") from None

    # Negations carry sentiment; dropping them would erase "not good".
    return frozenset(ENGLISH_STOP_WORDS - {"not", "no", "nor", "never", "but"})


def _social_media(text: str) -> str:
    """``text`` as ``social_media`` reads it: entities unescaped first (a "&lt;br /&gt;" is then a break, and an
    "&#64;ann" a mention), then URLs and mentions as placeholders, emoji spaced apart, stretched letters cut to three."""
    if "&" in text:
        text = _ENTITY.sub(_unescaped, text)
    # (each pattern only where it can match: searched for on every text, they cleaned IMDB 6x slower)
    if _may_hold_url(text):
        text = _URL.sub(_url_replaced, text)
    text = _MENTION.sub(f" {MENTION_WORD} ", text)
    if not text.isascii():
        text = _EMOJI.sub(lambda emoji: f" {emoji.group().replace(chr(0xFE0F), '').replace(chr(0x200D), '')} ", text)
    return _STRETCHED.sub(_shortened, text)


# The share of training texts holding a URL, a mention or an emoji from which a run without social_media says what it
# does: posts, not reviews (IMDB's training reviews: 91 of 22,504 hold a URL or an @word, none an emoji).
_POSTS_SHARE = 0.05


def social_media_note(texts: Sequence[str], config: CleaningConfig) -> str | None:
    """A note for a run whose training ``texts`` read like social-media posts (many hold a URL, an @mention or an
    emoji) and whose ``config`` leaves ``social_media`` off: what it would read otherwise; None when there is nothing
    to say. Off by default, since on the named corpora it changed what their recorded figures were measured on and
    gained nothing measurable there (BENCHMARKS.md, "Social-media posts").

    >>> social_media_note(["@ann loved it 😍", "a fine film"], CleaningConfig())[:44]
    'note: 1 of the 2 training texts (50%) hold a'
    >>> social_media_note(["@ann loved it 😍"], CleaningConfig(social_media=True))
    """
    if config.social_media or not texts:
        return None
    found = [mark for text in texts if (mark := _post_mark(text))]
    if len(found) < _POSTS_SHARE * len(texts):
        return None
    return (f"note: {len(found):,} of the {len(texts):,} training texts ({len(found) / len(texts):.0%}) hold a URL, "
            f"an @mention or an emoji (such as {shown(found[0], most=30)}), which are read as written: a URL as several tokens, "
            f"its path <unk>, emoji against punctuation as one token; --social-media reads them as tweet tokenizers "
            f"do (on generated posts +12 points of validation macro-F1, BENCHMARKS.md)")


def _may_hold_url(text: str) -> bool:
    """Whether ``_URL`` can match in ``text``: a cheap test before its search."""
    return "://" in text or "www." in text.lower()


def _post_mark(text: str) -> str | None:
    """The first URL, mention or emoji ``text`` holds, or None; each pattern searched only where it can match, as
    ``_social_media`` does (all three at every character took 2 s on IMDB's training reviews)."""
    for pattern, can_match in ((_URL, _may_hold_url(text)), (_MENTION, "@" in text),
                               (_EMOJI, not text.isascii())):
        if can_match and (match := pattern.search(text)):
            return match.group()
    return None


def _unescaped(entity: re.Match) -> str:
    """The character an entity ``_ENTITY`` found stands for; an unknown name as written (html.unescape would read
    "&notx;" as "¬x;", by the legacy name it begins with)."""
    found = entity.group()
    return html.unescape(found) if found[1] == "#" else html5.get(found[1:], found)


# What ends a sentence or closes a bracket after a URL: the text's, not the URL's ("see (https://x.com/a).")
_AFTER_URL = ".,;:!?)]}'\""


def _url_replaced(url: re.Match) -> str:
    """A URL ``_URL`` found, as ``URL_WORD`` followed by the punctuation ``\\S+`` took from the text after it (lost
    with the URL, it was a post's "!!!" or closing bracket); a ")" that closes a "(" of the URL's is the URL's."""
    found = url.group()
    kept = found.rstrip(_AFTER_URL)
    after = found[len(kept):]
    closing = len(after) - len(after.lstrip(")"))
    own = min(closing, max(0, kept.count("(") - kept.count(")")))  # (counted once: a loop was quadratic on "))))")
    return f" {URL_WORD} {after[own:]}"


def _shortened(stretched: re.Match) -> str:
    """A run ``_STRETCHED`` found, three times its character if a letter or a mark, as it was if a space, a digit or
    "_"."""
    character = stretched.group(1)
    return stretched.group() if character.isspace() or character.isdecimal() or character == "_" else character * 3


def unicode_normalized(text: str, config: CleaningConfig = CleaningConfig()) -> str:
    """``text`` in NFC where ``config`` says so (``unicode_nfc``): an accent typed as a letter and a combining mark
    ("cafe" + U+0301) is the one character most text holds ("caf\u00e9"), so that the two spellings are one word.

    >>> unnormalised = CleaningConfig(unicode_nfc=False)
    >>> unicode_normalized("cafe\u0301") == "caf\u00e9" != unicode_normalized("cafe\u0301", unnormalised)
    True
    """
    return unicodedata.normalize("NFC", text) if config.unicode_nfc else text


def clean(text: str, config: CleaningConfig = CleaningConfig()) -> str:
    """Clean one text as ``config`` says.

    >>> clean("Great<br />film!", CleaningConfig(strip_punctuation=True))
    'great film'
    >>> clean("cafe\u0301") == clean("caf\u00e9") == "caf\u00e9"
    True
    >>> clean("这个产品很好！")
    '这 个 产 品 很 好 ！'
    >>> clean("@ann sooooo good!!😍😍 &amp; https://t.co/x1", CleaningConfig(social_media=True))
    '@user sooo good!! 😍 😍 & httpurl'
    >>> clean("İstanbul")
    'istanbul'
    """
    text = unicode_normalized(text, config)
    if config.social_media:
        text = _social_media(text)
    text = _HTML_BREAK.sub(" ", text)
    if config.split_cjk:
        text = _CJK.sub(r" \g<0> ", text)
    if config.lowercase:
        if config.turkish_i:  # (İ is Turkish or Azerbaijani, whose i it is; "I" stays "i", as a language-blind guess)
            text = text.replace("\u0130", "i").replace("I\u0307", "i")  # (the second: İ typed in two, without NFC)
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
