import json
import pickle
import subprocess
import sys

import numpy as np
import pytest

from attnclf.errors import AttnclfError, DataError
from attnclf.text import BucketBatches, CleaningConfig, Tokenizer, TokenizerConfig, clean, truncate
from attnclf.text.tokenizer import PAD_ID, UNK_ID, unspaced_text_warning

CORPUS = ["the film was good", "the film was not good", "a bad film <br />really bad"] * 3


def test_word_tokenizer_reserves_pad_and_unk():
    tok = Tokenizer.train(CORPUS, TokenizerConfig(min_frequency=1))
    assert tok.backend.token_to_id("<pad>") == PAD_ID
    assert tok.backend.token_to_id("<unk>") == UNK_ID
    assert tok.encode(["zebra"])[0] == [UNK_ID]
    assert PAD_ID not in tok.encode(["the film was good"])[0]


def test_min_frequency_and_vocab_size_bound_the_vocabulary():
    tok = Tokenizer.train(CORPUS + ["rare"], TokenizerConfig(min_frequency=2))
    assert tok.backend.token_to_id("rare") is None
    small = Tokenizer.train(CORPUS, TokenizerConfig(min_frequency=1, vocab_size=5))
    assert small.vocab_size == 5


def test_empty_text_encodes_to_one_unknown_token():
    tok = Tokenizer.train(CORPUS, TokenizerConfig(min_frequency=1))
    assert tok.encode([""]) == [[UNK_ID]]


def test_bpe_splits_unseen_words_into_known_pieces():
    tok = Tokenizer.train(["the film was good and goodness"] * 20, TokenizerConfig(kind="bpe", vocab_size=60, min_frequency=1))
    tokens = tok.tokens(["goods"])[0]
    assert "<unk>" not in tokens and len(tokens) >= 2


def test_bpe_trains_the_same_tokenizer_in_every_process(tmp_path):
    # tokenizers' BpeTrainer numbered "##" pieces in the order of a hash map seeded per process, and broke ties between
    # merges by those numbers: three processes trained three tokenizers from these texts.
    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size=rng.integers(2, 9))) for _ in range(400)]
    texts = tmp_path / "texts.json"
    texts.write_text(json.dumps([" ".join(rng.choice(words, size=30)) for _ in range(600)]))
    code = ("import json, sys\n"
            "from attnclf.text.tokenizer import Tokenizer, TokenizerConfig\n"
            "config = TokenizerConfig(kind='bpe', vocab_size=600, min_frequency=2)\n"
            "sys.stdout.write(Tokenizer.train(json.loads(open(sys.argv[1]).read()), config).backend.to_str())")
    processes = [subprocess.Popen([sys.executable, "-c", code, str(texts)], stdout=subprocess.PIPE) for _ in range(3)]
    trained = [process.communicate(timeout=60)[0] for process in processes]
    assert all(process.returncode == 0 for process in processes)
    assert trained[0] and trained[1] == trained[0] and trained[2] == trained[0]


def old_bpe(texts: list[str]) -> Tokenizer:
    """A BPE tokenizer as runs saved before WORD_START trained them: "##" before a word's later pieces."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    backend = HFTokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix="##"))
    backend.decoder = decoders.WordPiece(prefix="##")
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.train_from_iterator([clean(text) for text in texts], trainer=trainers.BpeTrainer(
        vocab_size=60, min_frequency=1, special_tokens=["<pad>", "<unk>"], continuing_subword_prefix="##",
        show_progress=False))
    return Tokenizer(backend, TokenizerConfig(kind="bpe"))


def test_bpe_pieces_show_a_words_first_piece_bare_and_the_others_after_hashes(tmp_path):
    texts = ["the film was good, goodness", "a bad film"] * 10
    tok = Tokenizer.train(texts, TokenizerConfig(kind="bpe", vocab_size=60, min_frequency=1))
    ids = tok.encode(["Goodness, the films!"])[0]
    assert [tok.backend.id_to_token(i) for i in ids] == ["\u2581goodness", "\u2581,", "\u2581the", "\u2581film", "s",
                                                         "\u2581", "<unk>"]
    assert tok.token_strings(ids) == tok.tokens(["Goodness, the films!"])[0] == [
        "goodness", ",", "the", "film", "##s", "\u2581", "<unk>"]  # ("!" was never seen: no "▁!" nor "!")
    vocabulary = tok.vocabulary()
    assert len(vocabulary) == tok.vocab_size and vocabulary["film"] == tok.backend.token_to_id("\u2581film")
    assert vocabulary["<pad>"] == PAD_ID and vocabulary["<unk>"] == UNK_ID
    # A run's tokenizer from before: loaded from its file, it encodes as it did and shows its pieces as stored.
    old = old_bpe(texts)
    old.save(tmp_path / "tokenizer.json")
    again = Tokenizer.load(tmp_path / "tokenizer.json", TokenizerConfig(kind="bpe"))
    assert not again.marks_word_starts and again.encode(["Goodness, the films!"]) == old.encode(["Goodness, the films!"])
    stored = [again.backend.id_to_token(i) for i in again.encode(["the films"])[0]]
    assert again.token_strings(again.encode(["the films"])[0]) == stored == ["the", "film", "##s"]
    assert again.vocabulary() == again.backend.get_vocab()
    # Words are words in either: the word tokenizer's tokens are its vocabulary's strings.
    words = Tokenizer.train(texts, TokenizerConfig(min_frequency=1))
    assert words.tokens(["the films"]) == [["the", "<unk>"]] and words.vocabulary() == words.backend.get_vocab()


def test_bpe_vocabulary_gives_a_shown_form_to_the_words_first_piece_whatever_order_the_vocabulary_is_listed_in():
    # "\u2581###" (the word "###") and "#" (a later piece, shown "###" after "##") show alike, as do "\u2581####" and
    # "##". tokenizers lists its vocabulary in the order of a hash map seeded per process, and the last one listed kept
    # the form: the word "###" found the id of a piece inside a word in some processes, so --embeddings gave its vector
    # to another row, and the same seed and data other weights.
    class Listed:  # the tokenizer, its vocabulary listed in the given order
        def __init__(self, backend, reverse):
            self.backend, self.reverse, self.decoder = backend, reverse, backend.decoder

        def get_vocab(self):
            return dict(sorted(self.backend.get_vocab().items(), key=lambda item: item[1], reverse=self.reverse))

    no_stretch = CleaningConfig(social_media=False)  # (which reads "####" as "###", a stretched mark)
    tok = Tokenizer.train(["a ### b", "####", "# ## x"] * 3, TokenizerConfig(kind="bpe", vocab_size=100, min_frequency=1,
                                                                       cleaning=no_stretch))
    stored = tok.backend.get_vocab()
    assert {"\u2581###", "\u2581####", "#", "##"} <= set(stored)
    for reverse in (False, True):
        vocabulary = Tokenizer(Listed(tok.backend, reverse), tok.config).vocabulary()
        assert vocabulary["###"] == stored["\u2581###"] and vocabulary["####"] == stored["\u2581####"]
        assert vocabulary["x"] == stored["\u2581x"] and vocabulary["<unk>"] == UNK_ID


@pytest.mark.parametrize("how,expected", [("head", [0, 1, 2, 3]), ("tail", [6, 7, 8, 9]), ("head_tail", [0, 7, 8, 9])])
def test_truncation_keeps_the_right_end(how, expected):
    assert truncate(list(range(10)), 4, how) == expected
    assert truncate([1, 2], 4, how) == [1, 2]


def test_tokenizer_applies_max_len():
    tok = Tokenizer.train(CORPUS, TokenizerConfig(min_frequency=1, max_len=3, truncation="tail"))
    assert tok.tokens(["the film was not good"])[0] == ["was", "not", "good"]


@pytest.mark.parametrize("kind", ["word", "bpe"])
@pytest.mark.parametrize("how", ["head", "tail", "head_tail"])
def test_a_long_text_read_by_its_ends_gives_the_ids_of_the_whole(kind, how, characters_tokenised):
    import random

    rng = random.Random(kind + how)
    words = ["good", "bad", "the", "film", "<br />", "<BR/>", "Great!", "naïve", "ΣΟΦΙΑ", "don't", "x" * 300, "...",
             "end.", "\n", "\t"]

    def text(n):
        return " ".join(rng.choice(words) for _ in range(n))

    tok = Tokenizer.train([text(50) for _ in range(200)], TokenizerConfig(kind=kind, min_frequency=1, max_len=20,
                                                                             truncation=how, vocab_size=400))
    texts = [text(n) for n in (5, 80, 400, 3000) for _ in range(15)]
    encodings = tok.backend.encode_batch([clean(t) for t in texts], add_special_tokens=False)
    whole = [truncate(e.ids or [UNK_ID], 20, how) for e in encodings]
    assert tok.encode(texts) == whole
    # Each says how many tokens it lost, or, read by its ends, that it lost some (counting them means reading it all).
    cuts = [cut for _, cut in tok.encode_counting_cuts(texts)]
    assert [cut for cut in cuts if cut is not None] == [max(len(e.ids) - 20, 0) for e, cut in zip(encodings, cuts)
                                                        if cut is not None]
    assert all(len(e.ids) > 20 for e, cut in zip(encodings, cuts) if cut is None) and cuts.count(None) > 10
    # A huge text is tokenised by its two ends only, a few thousand characters, not its megabyte.
    huge = text(40_000)  # (about a megabyte)
    expected = truncate(tok.backend.encode(clean(huge), add_special_tokens=False).ids, 20, how)
    read = characters_tokenised(tok)
    assert tok.encode_counting_cuts([huge]) == [(expected, None)]
    assert 0 < max(read) < 10_000 < len(huge)


@pytest.mark.parametrize("kind", ["word", "bpe"])
def test_texts_read_whole_are_encoded_without_offsets(kind):
    """encode reads only ids: the backend's offset-tracking encode_batch cost IMDB's reviews 23% more time."""
    tok = Tokenizer.train(CORPUS, TokenizerConfig(kind=kind, min_frequency=1, vocab_size=60))
    expected = [e.ids for e in tok.backend.encode_batch([clean(t) for t in CORPUS], add_special_tokens=False)]

    class Calls:  # the backend, noting which of its methods encoding asks for
        def __init__(self, backend):
            self.backend, self.asked = backend, []

        def __getattr__(self, name):
            self.asked.append(name)
            return getattr(self.backend, name)

    tok.backend = calls = Calls(tok.backend)
    assert tok.encode(CORPUS) == expected
    assert "encode_batch_fast" in calls.asked and "encode_batch" not in calls.asked


@pytest.mark.parametrize("how", ["head", "tail", "head_tail"])
def test_a_long_text_is_said_to_have_lost_tokens_only_when_it_did(how):
    words = "good bad film plot acting dull great fine"
    tok = Tokenizer.train([words], TokenizerConfig(min_frequency=1, max_len=8, truncation=how))
    ids = tok.encode([words])[0]
    spaced = words.replace(" ", " <br />" * 2_000 + " ")  # 98,000 characters and 8 tokens: nothing to cut
    longer = words + " film"  # one token too many, read whole: counted
    huge = (words + " ") * 5_000  # read by its ends: some cut, not counted
    assert tok.encode_counting_cuts([spaced, longer, huge]) == [(ids, 0), (truncate(ids + ids[2:3], 8, how), 1),
                                                                (truncate(ids * 2, 8, how), None)]



def test_save_load_round_trip(tmp_path):
    config = TokenizerConfig(min_frequency=1)
    tok = Tokenizer.train(CORPUS, config)
    tok.save(tmp_path / "tokenizer.json")
    again = Tokenizer.load(tmp_path / "tokenizer.json", config)
    assert again.encode(CORPUS) == tok.encode(CORPUS)


@pytest.mark.parametrize("kind", ["word", "bpe"])
def test_a_texts_literal_special_tokens_are_words_as_training_read_them(kind, tmp_path):
    # A "<pad>" in a review was encoded as the padding id, so the model never saw it (masked), and "<unk>" as the
    # unknown id, though training had learned both as "<", "pad", ">".
    config = TokenizerConfig(kind=kind, min_frequency=1)
    tok = Tokenizer.train(["write <pad> and <unk> here", "a good film"] * 3, config)
    tok.save(tmp_path / "tokenizer.json")
    for loaded in (tok, Tokenizer.load(tmp_path / "tokenizer.json", config)):
        ids = loaded.encode(["write <pad> and <unk> here"])[0]
        assert PAD_ID not in ids and UNK_ID not in ids
        assert "pad" in loaded.tokens(["<pad>"])[0]


def test_cleaning_options():
    assert clean("Good<br />FILM") == "good film"
    assert clean("Good, film!", CleaningConfig(lowercase=False, strip_punctuation=True)) == "Good film"
    # negations survive stop-word removal: they decide sentiment
    assert clean("this is not the film", CleaningConfig(remove_stopwords=True)) == "not film"
    assert clean("the movies were running", CleaningConfig(lemmatize=True)) == "the movie be run"


def test_composed_and_decomposed_accents_are_one_token():
    # "café" typed with é (U+00E9) and with e + a combining acute (U+0301, as macOS file names and some keyboards
    # write it) look alike but were two words: each half of a file's texts learned its own.
    composed, decomposed = "caf\u00e9 na\u00efve", "cafe\u0301 nai\u0308ve"
    assert clean(decomposed) == clean(composed) == "caf\u00e9 na\u00efve"
    for kind in ("word", "bpe"):
        tok = Tokenizer.train([composed, decomposed] * 2, TokenizerConfig(kind=kind, min_frequency=1))
        assert tok.encode([decomposed]) == tok.encode([composed])


def test_a_run_saved_before_unicode_normalisation_keeps_reading_texts_as_it_was_trained():
    # Its config.json's cleaning has no unicode_nfc: it trained on texts as they came, and must go on reading them so.
    old = TokenizerConfig.from_dict({"kind": "word", "cleaning": {"lowercase": True}})
    assert old.cleaning.unicode_nfc is False and TokenizerConfig.from_dict({}).cleaning.unicode_nfc is False
    assert clean("cafe\u0301", old.cleaning) == "cafe\u0301"
    assert TokenizerConfig.from_dict(TokenizerConfig().to_dict()).cleaning == CleaningConfig()


def test_a_cleaning_pickled_before_unicode_normalisation_and_split_cjk_unpickles_as_it_was_trained():
    # A tokenizer pickled before those settings (inside a pickled AttentionTextClassifier) holds no value for them, and
    # unpickling fell back to the class defaults, True: the estimator composed accents and split Chinese it had trained
    # on unsplit, and changed its predictions silently. Its pickle is the __dict__ of a CleaningConfig without them.
    old = object.__new__(CleaningConfig)
    old.__dict__.update(lowercase=False, strip_punctuation=False, remove_stopwords=False, lemmatize=False)
    unpickled = pickle.loads(pickle.dumps(old))
    assert (unpickled.unicode_nfc, unpickled.split_cjk, unpickled.social_media, unpickled.turkish_i,
            unpickled.lowercase) == (False,) * 5
    assert clean("cafe\u0301 这个产品 &amp;", unpickled) == "cafe\u0301 这个产品 &amp;"
    assert pickle.loads(pickle.dumps(CleaningConfig())) == CleaningConfig()  # (one pickled since keeps its values)


def test_chinese_and_japanese_characters_are_each_a_word():
    # Chinese and Japanese put no spaces between words: both tokenizers took "这个产品很好" (this product is very good)
    # for one word, which no other review shares. Each ideograph and kana is one now, as BERT's basic tokenizer has
    # ideographs (kana too: the word tokenizer has no word pieces to cut "はとても" into); Hangul, Thai and scripts
    # written with spaces keep their words.
    assert clean("这个产品很好，6天就到了。") == "这 个 产 品 很 好 ，6 天 就 到 了 。"  # (punctuation: the tokenizers split it)
    assert clean("この映画はとても面白かった") == "こ の 映 画 は と て も 面 白 か っ た"
    assert clean("𠀀𪜀豈") == "𠀀 𪜀 豈"  # (extension B and C, a compatibility ideograph)
    # A kana's voicing mark typed apart (か + U+3099) is composed with it, or kept beside it without NFC.
    assert clean("か\u3099く") == "が く"
    assert clean("か\u3099く", CleaningConfig(unicode_nfc=False)) == "か\u3099 く"
    spaced = "정말 좋아요 สินค้าดีมาก Отличный товар a good film!"
    assert clean(spaced) == clean(spaced, CleaningConfig(split_cjk=False)) == spaced.lower()
    assert clean("这个产品很好", CleaningConfig(split_cjk=False)) == "这个产品很好"
    # An unseen sentence now reads as words the training texts held, with either tokenizer.
    for kind in ("word", "bpe"):
        tok = Tokenizer.train(["这个产品很好", "电影很差"], TokenizerConfig(kind=kind, min_frequency=1))
        assert UNK_ID not in tok.encode(["电影很好"])[0]


def test_a_run_saved_before_split_cjk_keeps_reading_texts_as_it_was_trained():
    old = TokenizerConfig.from_dict({"kind": "word", "cleaning": {"lowercase": True, "unicode_nfc": True}})
    assert old.cleaning.split_cjk is False and old.cleaning.unicode_nfc is True
    assert clean("这个产品很好", old.cleaning) == "这个产品很好"
    assert TokenizerConfig.from_dict(TokenizerConfig().to_dict()).cleaning.split_cjk is True


def test_social_media_posts_keep_urls_mentions_emoji_and_stretched_words_as_tokens_texts_share():
    # The whitespace pre-tokenizer shredded a URL into "https", "://", "t", ".", "co", "/" and a path no other post
    # holds (<unk>), a mention into "@" and a name, an entity into "&", "amp", ";"; it read "!!😍😍" as
    # one token, unseen beside "😍", and every stretching of "sooo" as a word of its own. URLs and mentions
    # read as placeholders now (as BERTweet's), entities as their characters, each emoji as a token, and a letter or
    # mark repeated past three times as three (NLTK's TweetTokenizer, reduce_len).
    post = "@User_12 sooooooo goood!!!!!😍😍 &amp; #GoodVibes https://t.co/Ab12Cd34Ef"
    posts = CleaningConfig(social_media=True)
    assert clean(post, posts) == "@user sooo goood!!! 😍 😍 & #goodvibes httpurl"
    assert clean("a 1000000 x ❤️👍🏽👨‍👩‍👧 bob@mail.com", posts) \
        == "a 1000000 x ❤ 👍🏽 👨👩👧 bob@mail.com"
    assert clean("____ 1111 ......\u0301\u0301\u0301\u0301 \u00bd\u00bd\u00bd\u00bd", posts) == "____ 1111 ...\u0301\u0301\u0301 \u00bd\u00bd\u00bd"
    assert clean(post) == post.lower()  # (off by default: named corpora's figures were measured without it)
    tok = Tokenizer.train(["so good!! 😍 https://t.co/x1 @ann", "@bob sooo bad 😡 www.a.com/b"] * 2,
                          TokenizerConfig(min_frequency=2, cleaning=posts))
    assert tok.tokens(["@carl soooooo good!!😍😍 https://bit.ly/zz9"]) == [
        ["@", "user", "sooo", "good", "!!", "😍", "😍", "httpurl"]]


def test_social_media_reads_a_url_without_the_punctuation_that_follows_it():
    # \S+ took the sentence's own ")", "," or "!!!" into the URL, and the placeholder replaced them with it: a post's
    # closing bracket and its exclamation marks were lost. A bracket the URL opened stays its own (Wikipedia's).
    posts = CleaningConfig(social_media=True)
    assert clean("see (https://x.com/a). ok", posts) == "see ( httpurl ). ok"
    assert clean("go to www.a.com, now", posts) == "go to httpurl , now"
    assert clean("loved it https://t.co/x1!!!", posts) == "loved it httpurl !!!"
    assert clean("(on https://en.wikipedia.org/wiki/Foo_(bar))", posts) == "(on httpurl )"
    assert clean("https://t.co/x1", posts) == "httpurl"


def test_social_media_reads_only_html_entities_with_their_semicolon_as_characters():
    # html.unescape also reads a hundred legacy names without one ("&not", "&copy", "&para"), as browsers do, so texts
    # that merely held a "&" changed: "this&nothing" read "this¬hing". Posts escape "&" as "&amp;", semicolon and all.
    posts = CleaningConfig(social_media=True)
    assert clean("this&nothing &notably AT&T &copy &para=1", posts) == "this&nothing &notably at&t &copy &para=1"
    assert clean("&amp; &lt;3 &#64;ann &#x1F60D; &copy; &notin; &notx; &bogus;", posts) == \
        "& <3 @user 😍 © ∉ &notx; &bogus;"


def test_a_run_saved_before_social_media_keeps_reading_texts_as_it_was_trained():
    old = TokenizerConfig.from_dict({"kind": "word", "cleaning": {"lowercase": True, "unicode_nfc": True,
                                                                  "split_cjk": True}})
    assert old.cleaning.social_media is False and old.cleaning.split_cjk is True
    assert clean("sooooo &amp; https://t.co/x", old.cleaning) == "sooooo &amp; https://t.co/x"
    assert TokenizerConfig.from_dict(TokenizerConfig(cleaning=CleaningConfig(social_media=True)).to_dict()
                                     ).cleaning.social_media is True
    assert "social_media" not in TokenizerConfig.from_dict({}).keyed()["cleaning"]  # (its token caches keep their key)


def test_a_turkish_capital_dotted_i_lower_cases_to_the_i_turkish_writes():
    # Python lower-cases "İ" to "i" + U+0307 (a combining dot), so "İstanbul" and "istanbul" were two words. "I" still
    # lower-cases to "i", not Turkish's "ı": which one a text means depends on its language, which cleaning does not
    # know.
    assert clean("İstanbul ILIK") == clean("I\u0307stanbul ILIK", CleaningConfig(unicode_nfc=False)) == "istanbul ilik"
    assert clean("İstanbul", CleaningConfig(turkish_i=False)) == "i\u0307stanbul"
    assert clean("İstanbul", CleaningConfig(lowercase=False)) == "İstanbul"
    tok = Tokenizer.train(["istanbul güzel", "İstanbul güzel"], TokenizerConfig(min_frequency=2))
    assert tok.tokens(["İSTANBUL", "istanbul"]) == [["istanbul"], ["istanbul"]]


def test_a_run_saved_before_turkish_i_keeps_reading_texts_as_it_was_trained():
    old = TokenizerConfig.from_dict({"cleaning": {"lowercase": True, "unicode_nfc": True, "split_cjk": True,
                                                  "social_media": True}})
    assert old.cleaning.turkish_i is False and old.cleaning.social_media is True
    assert clean("İstanbul", old.cleaning) == "i\u0307stanbul"
    assert TokenizerConfig.from_dict(TokenizerConfig().to_dict()).cleaning.turkish_i is True


def test_texts_written_without_spaces_are_warned_of_where_nothing_splits_them():
    # The word tokenizer read a run of such characters as one token, which no other review shares, and said nothing;
    # Chinese and Japanese are split into characters unless --no-split-cjk, Thai never is.
    chinese = ["这个产品很好，6天就到了。", "电影失望。", "我觉得质量差，而且坏了。"] * 4
    english = ["a good film", "a bad film"] * 20
    unsplit = TokenizerConfig(cleaning=CleaningConfig(split_cjk=False))
    warning = unspaced_text_warning(chinese + english, unsplit)
    assert warning.startswith("warning: 12 of the 52 training texts (23%) hold Chinese, Japanese or Thai")
    assert "--no-split-cjk" in warning and "\n" not in warning and len(warning) < 400
    # A run begun before split_cjk reads them so as it began, not for a flag its command gave
    warning = unspaced_text_warning(chinese + english, unsplit, begun_before=("split_cjk",))
    assert "--no-split-cjk" not in warning and "this run, begun before split_cjk, reads them as it began" in warning
    assert unspaced_text_warning(chinese, TokenizerConfig(kind="bpe", cleaning=unsplit.cleaning)) is None
    assert unspaced_text_warning(chinese + english, TokenizerConfig()) is None
    thai = ["สินค้าดีมากส่งเร็ว", "หนังเรื่องนี้แย่มาก"] * 5
    warning = unspaced_text_warning(thai, TokenizerConfig())
    assert warning.startswith("warning: 10 of the 10 training texts (100%) hold Thai, Lao, Khmer or Burmese")
    assert "--tokenizer bpe" in warning and "--no-split-cjk" not in warning
    # Spaced scripts, a few Chinese names among English, and short runs (a word, "很好") are no reason to warn.
    assert unspaced_text_warning(["Отличный товар", "هذا الفيلم مفيد", "यह उत्पाद बढ़िया है", "İYİ"] * 5,
                                 TokenizerConfig()) is None
    assert unspaced_text_warning(english + ["北京欢迎你 was fun"], unsplit) is None
    assert unspaced_text_warning(["很好 的 产品"] * 5, unsplit) is None


def test_bucket_batches_cover_every_example_once_and_group_lengths():
    rng = np.random.default_rng(0)
    sequences = [[1] * int(n) for n in rng.integers(1, 200, size=1000)]
    batches = BucketBatches(sequences, list(range(1000)), batch_size=32, shuffle=True, seed=1, pool_factor=10)
    seen = np.concatenate([b.indices for b in batches])
    assert sorted(seen.tolist()) == list(range(1000))
    padded = sum(b.input_ids.numel() for b in batches)
    assert padded < 1.15 * sum(len(s) for s in sequences)  # unsorted batches would pad ~2x


def test_bucket_batches_are_seeded_per_epoch():
    seqs = [[1] * (i % 7 + 1) for i in range(100)]
    a = BucketBatches(seqs, batch_size=8, seed=3)
    b = BucketBatches(seqs, batch_size=8, seed=3)
    first = [x.tolist() for x in a.batch_indices()]
    assert first == [x.tolist() for x in b.batch_indices()]
    a.set_epoch(1)
    assert first != [x.tolist() for x in a.batch_indices()]


def test_batches_mask_marks_real_tokens_and_labels_follow_indices():
    batches = BucketBatches([[5, 6, 7], [8], [9, 9]], [0, 1, 2], batch_size=3, shuffle=False)
    (batch,) = list(batches)
    assert batch.attention_mask.sum(1).tolist() == [1, 2, 3]
    assert batch.labels.tolist() == [1, 2, 0]
    assert (batch.input_ids[~batch.attention_mask] == PAD_ID).all()


def test_evaluation_batches_stay_within_a_token_budget_and_cover_every_text_once():
    rng = np.random.default_rng(0)
    sequences = [[1] * int(n) for n in rng.integers(1, 120, size=300)] + [[1] * 500]  # one over the budget
    batches = BucketBatches(sequences, batch_size=32, shuffle=False, max_tokens=400)
    seen = []
    for batch in batches:
        count, width = batch.input_ids.shape
        assert count <= 32 and (count * width <= 400 or count == 1)
        seen += batch.indices.tolist()
    assert sorted(seen) == list(range(len(sequences))) and len(batches) == len(list(batches))
    assert len(batches) > len(BucketBatches(sequences, batch_size=32, shuffle=False))  # long texts: smaller batches
    shuffled = BucketBatches(sequences, batch_size=32, shuffle=True, max_tokens=400)  # training ignores it
    assert len(shuffled) == -(-len(sequences) // 32) == len(list(shuffled))


@pytest.mark.parametrize("module, config, message", [
    ("sklearn.feature_extraction.text", CleaningConfig(remove_stopwords=True), "pip install scikit-learn"),
    ("simplemma", CleaningConfig(lemmatize=True), "pip install simplemma"),
])
def test_cleaning_without_its_optional_library_says_what_to_install(module, config, message, monkeypatch):
    """An ONNX export runs without scikit-learn and simplemma, unless its run cleaned texts with them."""
    import sys

    from attnclf.errors import AttnclfError
    from attnclf.text import cleaning

    cleaning._stop_words.cache_clear()
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if it were not installed
    with pytest.raises(AttnclfError, match=message):
        clean("the films were good", config)
    cleaning._stop_words.cache_clear()
    assert clean("the films were good") == "the films were good"  # the default cleaning needs neither


def test_a_tokenizer_that_learns_nothing_says_how_many_texts_it_read():
    # --val-fraction 0.99 of a small file leaves one text to train on: the count tells the user why.
    with pytest.raises(DataError, match="the one training text holds no word seen at least 2 time"):
        Tokenizer.train(["a b c"], TokenizerConfig(min_frequency=2))
    with pytest.raises(DataError, match="the 2 training texts hold no word seen at least 2 time"):
        Tokenizer.train(iter(["a b", "c d"]), TokenizerConfig(min_frequency=2))


@pytest.mark.parametrize("field, value", [("kind", "w" * 10_000), ("truncation", ["head"] * 5_000),
                                          ("max_len", "9" * 10_000), ("vocab_size", -10 ** 5000)],
                         ids=["kind", "truncation", "max_len", "vocab_size"])
def test_a_bad_tokenizer_setting_is_named_by_its_start_in_one_line(field, value):
    # Echoed whole, a 10,000-character value made the message as long; a 5,000-digit count could not be written at all.
    with pytest.raises(AttnclfError) as refused:
        TokenizerConfig(**{field: value})
    message = str(refused.value)
    assert message.startswith(f"tokenizer {field} must be") and len(message) < 200 and "\n" not in message


@pytest.mark.parametrize("settings, start", [
    ({"kind": np.array(["word", "bpe"] * 1_000)}, "tokenizer kind must be one of word, bpe, got array(['word', "),
    ({"kind": np.array("word")}, "tokenizer kind must be one of word, bpe, got array('word', "),
    ({"truncation": np.arange(5_000)}, "tokenizer truncation must be one of head, tail, head_tail, got array([ "),
    ({"cleaning": "x" * 10_000}, "tokenizer cleaning must be a CleaningConfig, got 'xxx"),
    ({"cleaning": {"lowercase": False}}, "tokenizer cleaning must be a CleaningConfig, got {'lowercase': False}"),
], ids=["kind-array", "kind-0d-array", "truncation-array", "cleaning-str", "cleaning-dict"])
def test_a_tokenizer_setting_of_another_type_is_refused_in_one_line_naming_the_field(settings, start):
    # A grid's numpy array as kind was a numpy "truth value is ambiguous" traceback; cleaning was not checked at all,
    # and a string there failed only once a text was cleaned (as lower-casing asked "x".lowercase).
    with pytest.raises(AttnclfError) as refused:
        TokenizerConfig(**settings)
    message = str(refused.value)
    assert message.startswith(start) and len(message) < 200 and "\n" not in message


@pytest.mark.parametrize("field, value", [("lowercase", np.array([True, False] * 1_000)), ("lemmatize", "yes"),
                                          ("strip_punctuation", 1)])
def test_a_cleaning_switch_that_is_not_true_or_false_is_refused_in_one_line(field, value):
    with pytest.raises(AttnclfError) as refused:
        CleaningConfig(**{field: value})
    message = str(refused.value)
    assert message.startswith(f"cleaning {field} must be True or False, got ") and len(message) < 200
    assert "\n" not in message


def test_numpy_settings_that_are_allowed_become_plain_python_values():
    config = TokenizerConfig(kind=np.str_("bpe"), cleaning=CleaningConfig(lowercase=np.bool_(False)))
    assert type(config.kind) is str and type(config.cleaning.lowercase) is bool
    assert json.dumps(config.to_dict())  # (config.json takes them)
