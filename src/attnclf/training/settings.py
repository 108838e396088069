"""What a run is: its data, tokenizer, model, training and output settings, as config.json records them.

``settings_for`` builds them from defaults, the dataset's recipe and overrides; ``resume_settings`` reads them back
from a run directory.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any


from ..checks import by_field, check_seed, whole_number
from ..data.files import columns_refusal, is_fasttext_file, recorded_text_column
from ..data.multilabel import DEFAULT_LABEL_DELIMITER
from ..data.registry import data_dir_refusal, folder_holding, sources
from ..data.splits import check_fraction
from ..errors import AttnclfError, shown, unknown_name
from ..models import MODELS
from ..recipes import recipe_model_config, run_recipe
from ..rundir import read_config, refuse_estimator_run
from ..text.cleaning import CLEANING_ADDED, CleaningConfig, added_since
from ..text.tokenizer import TokenizerConfig
from ..text.windows import WindowConfig
from .trainer import TrainConfig, checkpoint_state, stopped_early


def _set(owner, name: str, given: Collection[str]) -> bool:
    """Whether ``owner``'s field ``name`` was set: given by the caller (``given``: the command line's typed flags), or
    unlike its default (which settings alone cannot tell from a value typed equal to it)."""
    return name in given or getattr(owner, name) != getattr(type(owner), name)


def _count_refusal(owner, name: str, named: Callable[[str], str] = by_field) -> str | None:
    """Why ``owner``'s field ``name`` is refused, unless it is None or a whole number of at least 1; a numpy integer
    becomes an int (config.json takes no other).

    >>> _count_refusal(RunSettings(eval_batch_size=0), "eval_batch_size")
    'eval_batch_size must be at least 1, got 0'
    """
    value = getattr(owner, name)
    if value is None:
        return None
    count = whole_number(value)
    if count is None:
        return f"{named(name)} must be a whole number, got {shown(value)}"
    if count < 1:
        return f"{named(name)} must be at least 1, got {shown(count)}"
    setattr(owner, name, count)
    return None


def _refuse_first(refusals: Iterator[str]) -> None:
    """Raise the first of ``refusals``, if any, as one line; the rest are not looked for (they may rest on it)."""
    refusal = next(refusals, None)
    if refusal is not None:
        raise AttnclfError(refusal)


@dataclass
class DataSettings:
    """What a run trains, validates and tests on: a named dataset, or the user's files, and how they are read and
    split (config.json's ``settings.data``).

    >>> DataSettings(train_file="reviews.csv", val_fraction=0.2).describe()
    'reviews.csv'
    """

    dataset: str | None = None  # a registered source, or None for user files
    data_dir: str | None = None
    download: bool = False  # fetch a missing public dataset (users only; tests never download)
    train_file: str | None = None
    test_file: str | None = None
    validation_file: str | None = None  # validate on this file's texts, instead of a share carved from train_file
    # A column's name, or a list of several whose values join into one text per row (data/files.py)
    text_column: str | list[str] = "text"
    label_column: str = "label"
    val_fraction: float = 0.1
    # Seeds the validation split and any --max-train-examples sample; None: the run's seed. Runs that share
    # it validate on the same texts, so their ensemble can be validated (and chosen) there too.
    split_seed: int | None = None
    # "random" (stratified, seeded, grouped when the data has groups) or "latest": the latest texts of each class
    # by the order the data records, for data whose test split was written later than its training split.
    hold_out: str = "random"
    max_train_examples: int | None = None  # a stratified sample, for quick runs
    max_test_examples: int | None = None  # a stratified sample, the same for every seed
    multi_label: bool = False  # a set of labels per text (see data.multilabel); implied by a multi-label dataset
    label_delimiter: str = DEFAULT_LABEL_DELIMITER  # separates a CSV/TSV cell's labels when multi_label
    token_cache: bool = False  # train from memory-mapped token caches (text/cache.py), built once, reused
    token_cache_dir: str | None = None  # default: $ATTNCLF_CACHE_DIR, else ~/.cache/attnclf/tokens
    # Train on every labelled training text, the validation ones included, and validate on none: a refit of a
    # validated run (``refit_settings``), whose epochs were chosen where this run can no longer look.
    refit: bool = False
    # Where the named dataset was found when the run trained (through $ATTNCLF_DATA_DIR, the cache or data_dir),
    # searched after them: report, export and refit find it from a shell without them. A record, not a setting:
    # comparisons of runs leave it out.
    found_in: str | None = None

    def __post_init__(self):
        # One column recorded as a string, as runs always have (a list of one too); several as a list
        self.text_column = recorded_text_column(self.text_column)
        source = sources().get(self.dataset) if self.dataset else None
        if source is not None and source.multi_label:
            self.multi_label = True  # nothing else could train on it; files need the flag: their cells could be either

    def require_source(self) -> None:
        """Refuse settings that name neither a dataset nor a training file: nothing to train on.

        >>> DataSettings().require_source()
        Traceback (most recent call last):
        ...
        attnclf.errors.AttnclfError: give a dataset (--dataset NAME) or a training file (--train-file PATH)
        """
        if not self.dataset and not self.train_file:
            raise AttnclfError("give a dataset (--dataset NAME) or a training file (--train-file PATH)")

    def check(self, named: Callable[[str], str] = by_field, given: Collection[str] = ()) -> None:
        """Refuse settings a new run cannot train with: the first of their ``refusals``, in one line.

        >>> DataSettings(train_file="t.csv", label_delimiter=";").check()
        Traceback (most recent call last):
        ...
        attnclf.errors.AttnclfError: label_delimiter applies to multi-label data; add multi_label
        """
        _refuse_first(self.refusals(named, given))

    def refusals(self, named: Callable[[str], str] = by_field, given: Collection[str] = ()) -> Iterator[str]:
        """What a new run cannot train with in these settings, in order, each in one line that names each setting as
        ``named`` spells it (the command line: by its flag). ``given``: the fields the caller set (the command line:
        the flags typed), refused where they do not apply even at their default value (``--label-delimiter '|'``
        without ``--multi-label`` would read no label set). Whole numbers of numpy's types become ints. A saved run
        may record what a check added since refuses (a file that went unread beside its dataset): ``check_resumed``
        lets it resume.

        >>> list(DataSettings(train_file="t.csv", max_train_examples=0, val_fraction=2).refusals())
        ['max_train_examples must be at least 1, got 0', 'val_fraction must be in (0, 1), got 2']
        """
        if _set(self, "label_delimiter", given) and not self.multi_label:
            yield f"{named('label_delimiter')} applies to multi-label data; add {named('multi_label')}"
        if self.label_delimiter == "":
            yield f"{named('label_delimiter')} must be at least one character"
        for name in ("max_train_examples", "max_test_examples"):
            refusal = _count_refusal(self, name, named)
            if refusal:
                yield refusal
        if self.split_seed is not None:
            try:
                self.split_seed = check_seed(self.split_seed, named("split_seed"))  # (numpy's ints become ints)
            except AttnclfError as refused:
                yield str(refused)
        if self.validation_file and _set(self, "val_fraction", given):
            yield (f"{named('val_fraction')} carves validation from the training file; "
                   f"{named('validation_file')} replaces it")
        try:
            self.val_fraction = check_fraction(self.val_fraction, named("val_fraction"))  # (numpy's become floats)
        except AttnclfError as refused:
            yield str(refused)
        # Files beside a named dataset, which brings its own splits, would go unread
        files = [named(name) for name in ("train_file", "validation_file", "test_file") if getattr(self, name)]
        if self.dataset and files:
            yield (f"{named('dataset')} {self.dataset} brings its own splits; {files[0]} is for your own data "
                   f"({named('train_file')} with optional {named('validation_file')} and {named('test_file')}): "
                   f"give one or the other")
        # (a named dataset is read as it comes: a column typed for it went unread, without a word)
        if self.dataset and (flag := next((named(name) for name in ("text_column", "label_column")
                                           if _set(self, name, given)), None)):
            yield (f"{flag} names a column of your own file ({named('train_file')}); {named('dataset')} "
                   f"{self.dataset} is read as it comes: drop {flag}")
        if self.train_file and not self.dataset and is_fasttext_file(self.train_file):
            # (its text and labels have no columns to name; a flag naming one would be recorded, never read)
            flag = next((named(name) for name in ("text_column", "label_column", "label_delimiter")
                         if _set(self, name, given)), None)
            if flag:
                yield columns_refusal(self.train_file, flag)
        # A flag typed that would go unused, silently: the run trains in memory. (From Python, a folder set beside
        # token_cache=False is a toggle's other side, as the tests comparing the two set it.)
        if "token_cache_dir" in given and self.token_cache_dir and not self.token_cache:
            yield (f"{named('token_cache_dir')} says where {named('token_cache')} keeps its caches; add "
                   f"{named('token_cache')}, or drop {named('token_cache_dir')}")
        if self.validation_file and not self.train_file:
            yield f"{named('validation_file')} validates a {named('train_file')} run; give the training file too"
        if refusal := data_dir_refusal(self.data_dir, named("data_dir")):
            yield refusal

    def anchored(self) -> DataSettings:
        """These settings with absolute paths, as config.json records them: evaluate, refit and resume may run
        from another folder than the one ``train`` ran in (and runs are compared so, wherever they were typed).

        >>> DataSettings(train_file="/data/train.csv").anchored().train_file
        '/data/train.csv'
        """
        return replace(self, **{name: _absolute(getattr(self, name)) for name in
                                ("data_dir", "train_file", "validation_file", "test_file", "token_cache_dir")})

    def located(self) -> DataSettings:
        """These settings recording the folder their named dataset is read from now (``found_in``), as
        config.json keeps them; comparisons of runs leave it out, so only the run's record looks it up."""
        found = folder_holding(self.dataset, self.data_dir, self.found_in) if self.dataset else None
        return self if found is None else replace(self, found_in=str(found.absolute()))

    def describe(self) -> str:
        """What the run trains on, as messages name it: the dataset, else the training file's name.

        >>> DataSettings(dataset="imdb").describe(), DataSettings(train_file="/data/reviews.csv").describe()
        ('imdb', 'reviews.csv')
        """
        return self.dataset or Path(self.train_file or "?").name

    def describe_held_out(self, trained_labels: list[str], labels: list[str]) -> str:
        """What to name when validation texts changed: the training data when its classes did (``labels`` now
        against the run's ``trained_labels``: they number every label), else where the validation texts come from.

        >>> data = DataSettings(train_file="train.csv", validation_file="/data/dev.csv")
        >>> data.describe_held_out(["neg", "pos"], ["neg", "pos"]), data.describe_held_out(["neg", "pos"], ["a", "b"])
        ('dev.csv', 'train.csv')
        """
        return Path(self.validation_file).name if self.validation_file and labels == trained_labels else \
            self.describe()

    def data_seed(self, run_seed: int) -> int:
        """The seed that chooses which texts train and which validate: ``split_seed``, else the run's own.

        >>> DataSettings().data_seed(3), DataSettings(split_seed=0).data_seed(3)
        (3, 0)
        """
        return run_seed if self.split_seed is None else self.split_seed


COUNT_EMBEDDINGS = "count"


@dataclass
class RunSettings:
    """Everything a run is, as config.json's ``settings`` records it (``to_dict``): its data, tokenizer, model,
    training and where it writes; ``settings_for`` builds them, ``resume_settings`` reads them back.

    >>> RunSettings(DataSettings(dataset="demo"), model="boe", output="runs/demo").train.epochs
    10
    """

    data: DataSettings = field(default_factory=DataSettings)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    windows: WindowConfig | None = None  # read long texts as overlapping windows of max_len tokens
    model: str = "self-attn"
    model_config: dict = field(default_factory=dict)  # overrides of the model's config defaults
    train: TrainConfig = field(default_factory=TrainConfig)
    output: str = "runs/latest"
    device: str = "auto"
    threads: int | None = None  # PyTorch intra-op threads; None: one per core
    eval_batch_size: int = 128
    report: bool = True  # write report.html and plots/ when training ends
    # Word vectors (word2vec text) the token embedding starts from; "count": PPMI vectors counted first
    # from the training texts and the dataset's unlabelled ones (text/vectors.py).
    embeddings: str | None = None
    # Their entries' standard deviation once copied in (WordVectors.initialise). Rows this large barely
    # move under Adam's steps, so the vectors stay close to frozen: on SST-2 sentences validation rose
    # from 83.3% (0.5) through 84.1% (1), 84.4% (2) to 85.0% (4), and 84.9% at 8 (3 seeds each).
    embeddings_std: float = 4.0
    # A folder of `attnclf pretrain`: the self-attn encoder and token embedding start from it (training/pretrain.py).
    init_from: str | None = None
    # The n-gram branch's buckets (model_config's nb_ngram_buckets, then a cap) sized to the training texts as the
    # model is built (ngrams.sized_buckets): the file recipe's (recipes.FILE_BUCKETS_SIZED), unless --set gives the
    # count.
    ngram_buckets_sized: bool = False
    # A refit's record of the validated run it retrains: {"run", "epochs", "monitor", "value", "validation_sha256"},
    # and a multi-label run's "thresholds" (by label), which the refit predicts at.
    refit_of: dict | None = None
    # Not a setting: the cleaning settings added since the first release (CLEANING_ADDED) that the run's config.json
    # lacks, recorded before them. Such a run read texts as every command built it then, and is recorded so still.
    recorded_without: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def to_dict(self) -> dict:
        """These settings as config.json records them: a run recorded before a cleaning setting, resumed or joined by
        new ensemble members, stays without the field, so its command is told apart from one that typed the flag
        (``as_begun``).

        >>> "split_cjk" in RunSettings(recorded_without=("split_cjk",)).to_dict()["tokenizer"]["cleaning"]
        False
        """
        recorded = asdict(self)
        for name in recorded.pop("recorded_without"):
            del recorded["tokenizer"]["cleaning"][name]
        return recorded

    def as_begun(self, built: RunSettings) -> RunSettings:
        """``built``, what a command builds now, as the same command built it when this run was recorded: with the
        value every command gave a cleaning setting added since, where the run's config.json predates it. Compared
        so, a run recorded before unicode_nfc or split_cjk is its command's still (a compared cell reused, a run or
        ensemble resumed), and what continues it (an ensemble's new members) reads texts as it did; a run that typed
        --no-split-cjk recorded it, and a command without the flag differs.

        >>> old = RunSettings(recorded_without=("split_cjk",))
        >>> old.as_begun(RunSettings()).tokenizer.cleaning.split_cjk, RunSettings().tokenizer.cleaning.split_cjk
        (False, True)
        >>> posts = RunSettings(tokenizer=TokenizerConfig(cleaning=CleaningConfig(social_media=True)))
        >>> RunSettings(recorded_without=("social_media",)).as_begun(posts).tokenizer.cleaning.social_media
        True
        """
        if not self.recorded_without:
            return built
        # Not one the command set away from both its default and that value: a flag typed (--social-media; the flags
        # of those added before it set that value). It stays as typed, recorded too, so it differs from the run's.
        untyped = tuple(name for name in self.recorded_without if getattr(built.tokenizer.cleaning, name) in
                        (getattr(CleaningConfig(), name), CLEANING_ADDED[name]))
        cleaning = built.tokenizer.cleaning.as_before(untyped)
        return replace(built, tokenizer=replace(built.tokenizer, cleaning=cleaning), recorded_without=untyped)

    def check(self, named: Callable[[str], str] = by_field, given: Collection[str] = (), resumed: bool = False) -> None:
        """Refuse what a new run cannot train with: the first of these settings' ``refusals``, in one line.

        >>> RunSettings(embeddings_std=2.0).check()
        Traceback (most recent call last):
        ...
        attnclf.errors.AttnclfError: embeddings_std needs embeddings FILE (or count)
        """
        _refuse_first(self.refusals(named, given, resumed))

    def refusals(self, named: Callable[[str], str] = by_field, given: Collection[str] = (),
                 resumed: bool = False) -> Iterator[str]:
        """``DataSettings.refusals``, then these settings' own, naming each setting as ``named`` spells it (the
        command line: by its flag); ``given``: the fields the caller set, as there. ``resumed``: the settings
        describe runs recorded already (the command that began them, --resume added), which ``check_resumed``
        checks against their record: a ``split_seed`` beside a ``validation_file``, recorded before it was refused,
        is left to it.

        >>> list(RunSettings(eval_batch_size=0).refusals())
        ['eval_batch_size must be at least 1, got 0']
        """
        yield from self.data.refusals(named, given)
        # Here, not among the data's: compare and ablate cap the training texts of their cells (DEFAULT_CAPS, --quick),
        # a sample the seed draws, validation file or not.
        data = self.data
        if data.split_seed is not None and data.validation_file and not data.max_train_examples and not resumed:
            yield (f"{named('split_seed')} seeds the validation split carved from the training file (and a "
                   f"{named('max_train_examples')} sample); with {named('validation_file')} every run validates on "
                   f"that file: drop {named('split_seed')}")
        refusal = _count_refusal(self, "eval_batch_size", named)
        if refusal:
            yield refusal
        if _set(self, "embeddings_std", given) and not self.embeddings:  # (it would scale nothing)
            yield f"{named('embeddings_std')} needs {named('embeddings')} FILE (or count)"
        if self.embeddings and not 0 < self.embeddings_std < math.inf:
            yield f"{named('embeddings_std')} must be positive and finite, got {shown(self.embeddings_std)}"

    def anchored(self) -> RunSettings:
        """These settings with absolute data and word-vector paths (``DataSettings.anchored``).

        >>> RunSettings(embeddings="/vectors/glove.txt").anchored().embeddings
        '/vectors/glove.txt'
        """
        embeddings = self.embeddings if self.embeddings == COUNT_EMBEDDINGS else _absolute(self.embeddings)
        return replace(self, data=self.data.anchored(), embeddings=embeddings, init_from=_absolute(self.init_from))

    def first_difference(self, other: RunSettings, ignore: Collection[str] = ()) -> tuple[str, Any, Any] | None:
        """The first setting, named "section.field", in which ``other`` differs from these, with its value here and
        there; None if they agree. Paths compare absolute, where the data lies is left out (a copy elsewhere is the
        same data: runs check their texts' fingerprints), and so is how and where a run trains (its output, device,
        threads, report, checkpoint interval) and whatever ``ignore`` names. A model field left unset counts as
        its default (``--set d_model=128`` builds the model no flag builds).

        >>> RunSettings(train=TrainConfig(lr=0.1)).first_difference(RunSettings())
        ('train.lr', 0.1, 0.001)
        """
        return next(self.differences(other, ignore), None)

    def differences(self, other: RunSettings, ignore: Collection[str] = ()) -> Iterator[tuple[str, Any, Any]]:
        """Each setting in which ``other`` differs from these, as ``first_difference`` finds the first: these are a
        run's, ``other`` what a command builds, taken as it built it when the run was recorded (``as_begun``).

        >>> list(RunSettings(model_config={"d_model": 64}).differences(RunSettings(model_config={"d_model": 128})))
        [('model_config.d_model', 64, 128)]
        """
        ours, theirs = self._flat(), self.as_begun(other)._flat()
        ignored = {"output", "device", "threads", "report", "train.checkpoint_seconds",
                   "train.checkpoint_minutes", "data.data_dir",
                   "data.found_in", *ignore}
        keys = [*ours, *(key for key in theirs if key not in ours)]
        return ((key, ours.get(key), theirs.get(key)) for key in keys
                if key not in ignored and ours.get(key) != theirs.get(key))

    def _flat(self) -> dict:
        flat = {}
        settings = self.anchored().to_dict()
        if self.model in MODELS:  # (a run records only the fields it set; what it built took the others' defaults)
            settings["model_config"] = {f.name: f.default for f in fields(MODELS[self.model].config_class)
                                        if f.name not in DERIVED_MODEL_FIELDS and f.default is not MISSING} | \
                settings["model_config"]
        for key, value in settings.items():
            for name, inner in (value.items() if isinstance(value, dict) else [(None, value)]):
                flat[key if name is None else f"{key}.{name}"] = inner
        return flat


def nearest_difference(trained: RunSettings, builds: Sequence[RunSettings],
                       ignore: Collection[str] = ()) -> tuple[str, Any, Any] | None:
    """The first setting in which ``trained`` differs from the nearest of ``builds`` (the fewest settings apart,
    the first on a tie): where a command could build several (a file's self-attn under each edition of the file
    recipe), the one the run is nearer to holds the flag that differs, not the recipe's values. Only a setting in
    which the first of ``builds`` (what the command builds now) differs too is named, with its value there; else the
    first of those (the nearer build's differences may be values the command no longer gives).

    >>> run = RunSettings(model_config={"layers": 1})
    >>> nearest_difference(run, [RunSettings(model_config={"layers": 2, "d_model": 64}),
    ...                          RunSettings(model_config={"layers": 2})])
    ('model_config.layers', 1, 2)
    """
    apart = [list(trained.differences(build, ignore)) for build in builds]
    now = {key: (key, theirs, ours) for key, theirs, ours in apart[0]}
    return next((now[key] for key, _, _ in min(apart, key=len) if key in now), apart[0][0] if apart[0] else None)


def _absolute(path: str | None) -> str | None:
    return os.path.abspath(os.path.expanduser(path)) if path else path


# Model config fields a run sets itself, and where they come from.
DERIVED_MODEL_FIELDS = {"vocab_size": "the trained tokenizer (TokenizerConfig.vocab_size caps it, --vocab-size)",
                        "num_classes": "the labels", "max_len": "TokenizerConfig.max_len (--max-len)",
                        "pad_id": "the tokenizer"}


def refuse_derived_fields(model_config: dict, sources: dict[str, str] = DERIVED_MODEL_FIELDS) -> None:
    """One line if ``model_config`` sets a field the run derives (build_model would get it twice), naming its source
    in the caller's terms (``sources``: field -> where it comes from).

    >>> refuse_derived_fields({"d_model": 64})
    """
    derived = sorted(set(model_config) & set(sources))
    if derived:
        raise AttnclfError(f"model_config sets {derived[0]}, which comes from {sources[derived[0]]}")


def settings_for(data: DataSettings, model: str, *, model_config: dict | None = None, train: dict | None = None,
                 tokenizer: dict | None = None, cleaning: CleaningConfig | None = None, output: str | None = None,
                 device: str = "auto", file_recipe: int = -1) -> RunSettings:
    """RunSettings from general defaults, then the run's recipe (``recipes.run_recipe``: the dataset's, or for a
    file's single-label ``self-attn`` the file recipe's edition ``file_recipe``, an index into
    ``recipes.FILE_RECIPES``: the latest by default, an earlier one to rebuild a run begun under it), then the given
    overrides.

    ``model_config``, ``train`` and ``tokenizer`` override fields of the model's
    config, ``TrainConfig`` and ``TokenizerConfig``; an unknown field is an
    error, and so are the model fields the run sets itself (vocab_size,
    num_classes, max_len: set --max-len through the tokenizer; pad_id: the tokenizer's).

    >>> s = settings_for(DataSettings(dataset="synthetic"), "boe", train={"epochs": 2})
    >>> s.train.epochs, s.train.batch_size, s.tokenizer.max_len
    (2, 64, 32)
    >>> before = settings_for(DataSettings(train_file="t.csv"), "self-attn", file_recipe=0)  # before any file recipe
    >>> before.model_config, before.tokenizer.max_len
    ({}, 256)
    """
    if model not in MODELS:
        raise AttnclfError(unknown_name("model", model, MODELS))
    data.check()
    recipe = run_recipe(data.dataset, model, data.multi_label, file_recipe)
    model_fields = {f.name for f in fields(MODELS[model].config_class)}
    merged_model = recipe_model_config(recipe, model) | (model_config or {})
    merged_train = recipe.get("train", {}) | (train or {})
    if data.multi_label:
        # Not F1 at 0.5: it stays 0 while a label's probabilities are all below 0.5 (early on, for any label on
        # fewer than half the texts), which ends slow learners after `patience` epochs (boe on topics: epoch 4).
        merged_train.setdefault("monitor", "loss")
    merged_tokenizer = recipe.get("tokenizer", {}) | (tokenizer or {})
    # (a count given with --set is built as given: FILE_BUCKETS_SIZED)
    sized = bool(recipe.get("ngram_buckets_sized")) and "nb_ngram_buckets" not in (model_config or {})
    for what, overrides, valid in (
        (f"model {model!r}", merged_model, model_fields - set(DERIVED_MODEL_FIELDS)),
        ("TrainConfig", merged_train, {f.name for f in fields(TrainConfig)}),
        ("TokenizerConfig", merged_tokenizer, {f.name for f in fields(TokenizerConfig)} - {"cleaning"}),
    ):
        unknown = sorted(overrides.keys() - valid)
        if unknown:
            raise AttnclfError(f"{what} has no settable field {unknown[0]!r}; valid: {', '.join(sorted(valid))}")
    return RunSettings(
        data=data,
        tokenizer=TokenizerConfig(**merged_tokenizer, cleaning=cleaning or CleaningConfig()),
        model=model,
        model_config=merged_model,
        train=TrainConfig(**merged_train),
        output=output or f"runs/{model}-{data.describe()}",
        device=device,
        embeddings=recipe.get("embeddings"),
        ngram_buckets_sized=sized,
    )


def resume_start(run_dir: str | Path) -> str | None:
    """What ``train --resume`` does with the interrupted run in ``run_dir``, said after its command: continues after
    its last checkpointed epoch (of those its settings plan), from the step after the one a checkpoint within an epoch
    kept (``checkpoint_kept`` says which), or only tests it when its training had finished before the stop; None
    without a checkpoint, which nothing resumes (none is written as a run is stopped, only every
    ``checkpoint_minutes`` within an epoch, after an epoch ``checkpoint_seconds`` on, and after its last).

    >>> resume_start("no/such/run") is None
    True
    """
    from ..rundir import is_resumable

    if not is_resumable(run_dir):
        return None
    if (checkpointed := _checkpointed(run_dir)) is None:
        return "continues from its last checkpoint"
    epoch, epochs, finished, step = checkpointed
    if finished:
        return f"tests it: its training had finished ({finished})"
    if step:
        return f"continues from step {step[0] + 1}"
    return f"continues after epoch {epoch} of {epochs}, its last checkpoint"


def checkpoint_kept(run_dir: str | Path) -> str | None:
    """Where within an epoch the interrupted run in ``run_dir`` was checkpointed last ("kept step 812 of 28,125 in
    epoch 1 of 4"); None if that was an epoch's end, or there is none.

    >>> checkpoint_kept("no/such/run") is None
    True
    """
    if (checkpointed := _checkpointed(run_dir)) is None or checkpointed[3] is None:
        return None
    epoch, epochs, _, step = checkpointed
    return f"kept step {step[0]:,} of {step[1]:,} in epoch {epoch + 1} of {epochs}"


def _step_kept(state: dict) -> tuple[int, int] | None:
    """The step and the epoch's steps a checkpoint's ``state`` holds from within an epoch; None for one at an epoch's
    end.

    >>> _step_kept({"epoch": 0, "step": 812, "epoch_steps": 28125}), _step_kept({"epoch": 1})
    ((812, 28125), None)
    """
    step, steps = state.get("step"), state.get("epoch_steps")
    return (step, steps) if isinstance(step, int) and isinstance(steps, int) and step > 0 else None


def _checkpointed(run_dir: str | Path) -> tuple[int, int, str | None, tuple[int, int] | None] | None:
    """The epoch the run's last checkpoint holds, the epochs its settings plan, how its training had finished
    (``finished_training``; None while it has epochs to go) and the step it kept within an epoch (``_step_kept``;
    None at an epoch's end), from one read of its state.json; None where they cannot be read (resuming says why)."""
    try:
        state, planned = checkpoint_state(run_dir), read_config(run_dir)["settings"]["train"]
        epoch, epochs, patience = state.get("epoch"), planned["epochs"], planned.get("patience", 0)
    except (AttnclfError, KeyError, TypeError, AttributeError):
        return None
    step = _step_kept(state)
    if not isinstance(epoch, int) or epoch < (0 if step else 1):  # (step 812 of epoch 1 follows 0)
        return None
    return epoch, epochs, finished_training(state, epochs, patience), step


def run_progress(run_dir: str | Path) -> str:
    """How far the run in ``run_dir`` got, in a few words: a `train --seeds` member's, which `--resume` keeps
    ("finished"), continues ("after epoch 2 of 4") or trains ("not started", or started with no epoch checkpointed).

    >>> run_progress("no/such/run")
    'not started'
    """
    from ..rundir import is_resumable

    run_dir = Path(run_dir)
    if (run_dir / "metrics.json").is_file():  # (a run's last file: it is tested)
        return "finished"
    if is_resumable(run_dir):
        if (checkpointed := _checkpointed(run_dir)) is None:
            return "checkpointed"
        epoch, epochs, finished, step = checkpointed
        if finished:
            return f"trained ({finished}), not tested"
        return (f"after step {step[0]:,} of epoch {epoch + 1} of {epochs}" if step
                else f"after epoch {epoch} of {epochs}")
    return "started, no epoch checkpointed" if (run_dir / "config.json").is_file() else "not started"


def finished_training(state: dict, epochs: int, patience: int) -> str | None:
    """How the run whose last checkpoint recorded ``state`` had finished training, were it to train for ``epochs``
    with ``patience``: a resume then trains nothing, and only tests it; None while it has epochs to go.

    >>> finished_training({"epoch": 3}, 3, 0), finished_training({"epoch": 2, "stale_epochs": 1}, 4, 1)
    ('all 3 epochs', 'stopped early after epoch 2 of 4')
    >>> finished_training({"epoch": 3}, 5, 0) is None
    True
    """
    epoch = state.get("epoch", 0)
    if stopped_early(state, patience):
        return f"stopped early after epoch {epoch} of {epochs}"
    return f"all {epochs} epochs" if epoch >= epochs else None


def check_resumed(settings: RunSettings, named: Callable[[str], str] = by_field) -> None:
    """``RunSettings.check`` for settings that continue the run in ``settings.output``: the first of their
    ``refusals`` that the run's own recorded settings do not earn as well. A run trained before a check was added
    resumes as it trained, and what a caller changes meets every check, those after the record's refusal too.

    >>> # settings = resume_settings("runs/demo"); settings.eval_batch_size = 0; check_resumed(settings)
    >>> # AttnclfError: eval_batch_size must be at least 1, got 0
    """
    recorded = None  # (read only when a refusal needs forgiving: most resumes earn none)
    for refusal in settings.refusals(named):
        if recorded is None:
            recorded = _recorded_refusals(settings.output, named)
        if refusal not in recorded:
            raise AttnclfError(refusal)


def _recorded_refusals(run_dir: str | Path, named: Callable[[str], str]) -> set[str]:
    """What ``RunSettings.refusals`` says of the settings the run in ``run_dir`` recorded (nothing to forgive where
    no run can be read)."""
    try:
        return set(resume_settings(run_dir).refusals(named))
    except AttnclfError:
        return set()


def resume_settings(run_dir: str | Path, epochs: int | None = None, device: str | None = None,
                    threads: int | None = None, named: Callable[[str], str] = by_field,
                    data_dir: str | None = None) -> RunSettings:
    """The interrupted run's own settings; only the epoch budget, the device and the threads may change (threads
    as the run trained unless given: the same threads give the same arithmetic, so the result an uninterrupted run
    would have reached), and ``data_dir``, where the dataset lies now (the run checks it is the same data). Errors
    name a setting as ``named`` spells it (the command line: by its flag).

    >>> # resume_settings("runs/demo", epochs=1)  # after 2 epochs
    >>> # AttnclfError: runs/demo has trained 2 epochs already; epochs 1 is fewer (give more to train on, or ...)
    """
    config = read_config(run_dir)
    refuse_estimator_run(config, "training data to resume or refit on; fit the estimator again", run_dir)
    saved = config["settings"]
    train = TrainConfig(**saved["train"])
    if epochs is not None and saved["data"].get("refit") and epochs != train.epochs:
        raise AttnclfError(f"{run_dir} is a refit for the {train.epochs} epoch(s) its run chose; resume it without "
                           f"{named('epochs')}")
    if epochs is not None:
        train = TrainConfig(**{**saved["train"], "epochs": epochs}, named=named)  # checked like a new setting
        state = checkpoint_state(run_dir)
        done = state.get("epoch", 0)
        if epochs != saved["train"]["epochs"] and stopped_early(state, train.patience):
            raise AttnclfError(f"{run_dir} stopped early, at epoch {done}: its validation {train.monitor} had not "
                               f"improved for {train.patience} epochs ({named('patience')}), so another epoch "
                               f"budget ({named('epochs')}) would train nothing; resume it without {named('epochs')}, "
                               f"or train it again with a larger {named('patience')}")
        if epochs < done:  # it would stop at once, recording a budget its history contradicts
            raise AttnclfError(f"{run_dir} has trained {done} epochs already; {named('epochs')} {epochs} is fewer "
                               f"(give more to train on, or none to finish as planned)")
    return RunSettings(
        data=DataSettings(**{**saved["data"], **({"data_dir": data_dir} if data_dir else {})}),
        tokenizer=TokenizerConfig.from_dict(saved["tokenizer"]),
        windows=WindowConfig(**saved["windows"]) if saved.get("windows") else None,
        model=saved["model"],
        model_config=saved["model_config"],
        train=train,
        output=str(run_dir),
        device=device or saved["device"],
        threads=threads if threads is not None else saved.get("threads"),
        eval_batch_size=saved["eval_batch_size"],
        report=saved.get("report", True),
        embeddings=saved.get("embeddings"),  # the checkpoint holds what they started; kept for the record
        embeddings_std=saved.get("embeddings_std", RunSettings.embeddings_std),
        init_from=saved.get("init_from"),
        ngram_buckets_sized=saved.get("ngram_buckets_sized", False),  # (recorded since 2026-11-28; none sized before)
        refit_of=saved.get("refit_of"),
        recorded_without=added_since(saved["tokenizer"].get("cleaning", {})),
    )


# What a resumed run may be given besides its own settings (by their option names): what may change, and where its
# dataset lies now.
RESUME_OPTIONS = frozenset({"resume", "output", "epochs", "device", "threads", "quiet", "no_report", "data_dir",
                            "checkpoint_minutes"})


def check_resume_command(settings: RunSettings, typed: Collection[str], built: Callable[[], RunSettings],
                         earlier: Callable[[RunSettings], Sequence[RunSettings]],
                         named: Callable[[str], str] = by_field,
                         log: Callable[[str], None] = lambda line: None) -> None:
    """Refuse what a command that resumes the run of ``settings`` (``resume_settings``) may not give, naming options
    as ``named`` spells them. ``typed``: the options it gave, by their settings' names; besides ``RESUME_OPTIONS``
    only the whole command that started the run, --resume added, which ``built()`` builds (called only then): a run
    continues with its own settings, so other flags are an error, not a silent no-op. A run whose command now builds
    otherwise under the file recipe, and built it so under an earlier edition (``earlier(built)``), passes with a
    note to ``log``. Data files given anew move the run's (it checks they give the texts it recorded); without
    "device", the device the run trained on must be here.

    >>> check_resume_command(RunSettings(output="runs/demo"), {"output", "lr"}, lambda: None, lambda built: [])
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: resume with lr takes the whole command that started runs/demo, its dataset or \
train_file too, resume added; or give only output (and epochs, device, threads or checkpoint_minutes to change them)
    """
    typed = set(typed)
    only_output = (f"only {named('output')} (and {named('epochs')}, {named('device')}, {named('threads')} or "
                   f"{named('checkpoint_minutes')} to change them)")
    if typed - RESUME_OPTIONS:  # the command that started the run, --resume added: it must describe it
        if not typed & {"dataset", "train_file"}:  # (else the first difference named is the data, never typed)
            flags = " ".join(named(name) for name in sorted(typed - RESUME_OPTIONS))
            raise AttnclfError(f"{named('resume')} with {flags} takes the whole command that started "
                               f"{settings.output}, its {named('dataset')} or {named('train_file')} too, "
                               f"{named('resume')} added; or give {only_output}")
        described = built()
        # Files that moved: the run checks they still give the texts it recorded (a token-cache run resumes from
        # its files where they were: it records no fingerprint of its texts to check a moved file against).
        moved = set() if settings.data.token_cache else {
            name for name in typed & {"train_file", "validation_file", "test_file"}
            if getattr(settings.data, name) and (name != "test_file" or _records_test_fingerprint(settings.output))}
        ignore = {"train.epochs", "train.schedule_epochs", "embeddings", "embeddings_std", "init_from",
                  *(f"data.{name}" for name in moved)}  # (the vectors: refuse_other_vectors, below)
        note = check_same_settings(settings, described, f"{named('resume')} continues the run with its own settings; "
                                   f"give the command that started it, or {only_output}", ignore,
                                   lambda: earlier(described))
        if note:
            log(f"note: {note}")
        refuse_other_vectors(described, settings, typed, named)
        for name in moved:
            setattr(settings.data, name, getattr(described.data, name))
    if "device" not in typed:
        _check_run_device(settings, named)


def _records_test_fingerprint(run_dir: str | Path) -> bool:
    """Whether the run in ``run_dir`` recorded its test file's fingerprint (a moved one can be checked against it)."""
    return "test_sha256" in read_config(run_dir).get("data", {})


def check_same_settings(trained: RunSettings, built: RunSettings, remedy: str, ignore: Collection[str] = (),
                        earlier: Callable[[], Sequence[RunSettings]] = tuple) -> str | None:
    """Refuse ``built``, what a command that continues the run of ``trained`` builds (`train --resume`, a fold of
    `suspects --resume`), where it would train another model than the run did, naming the setting that differs and
    ``remedy``; ``ignore``: the settings ("section.field") it may change. A run with the settings the command built
    under an earlier edition of the file recipe (``earlier()``, built only on a difference) was begun by this
    command then, and continues under that edition, as an ensemble's members do: it passes with a note, returned,
    naming the model and tokenizer fields the command builds otherwise now. Another is told the setting that differs
    from the nearest of the builds (a flag typed, not the recipe's values).

    >>> run = RunSettings(output="runs/demo")
    >>> check_same_settings(run, replace(run, train=TrainConfig(epochs=7)), "remedy", ignore={"train.epochs"})
    >>> check_same_settings(run, replace(run, train=TrainConfig(lr=0.5)), "give its flags")
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: runs/demo trained with train.lr = 0.001, this command gives 0.5: give its flags
    """
    if trained.first_difference(built, ignore=ignore) is None:
        return None
    builds = earlier()
    if any(trained.first_difference(build, ignore=ignore) is None for build in builds):
        changed = ", ".join(_changed(key, theirs, ours)
                            for key, theirs, ours in trained.differences(built, ignore=ignore))
        return (f"{trained.output} began under an earlier file recipe: this command now builds {changed}; the run "
                f"keeps its own settings")
    key, theirs, ours = nearest_difference(trained, [built, *builds], ignore)
    raise AttnclfError(f"{trained.output} trained with {key} = {theirs!r}, this command gives {ours!r}: {remedy}")


def _changed(key: str, theirs, ours) -> str:
    """A setting the command builds otherwise than a run begun under an earlier file recipe, as the note of its
    resume names it.

    >>> _changed("model_config.d_model", 128, 64), _changed("ngram_buckets_sized", False, True)
    ('d_model=64 (the run: 128)', 'the n-gram buckets sized to the training texts (the run: a fixed count)')
    """
    if key == "ngram_buckets_sized":  # (no flag sets it: --set nb_ngram_buckets=N fixes the count)
        return ("the n-gram buckets sized to the training texts (the run: a fixed count)" if ours else
                "a fixed count of n-gram buckets (the run: sized to its training texts)")
    return f"{key.partition('.')[2]}={ours} (the run: {theirs})"


def refuse_other_vectors(built: RunSettings, trained: RunSettings, typed: Collection[str],
                         named: Callable[[str], str] = by_field) -> None:
    """Refuse a pretrained encoder or word vectors other than those the run of ``trained`` started from, where the
    command resuming it (or adding members beside it) gave them (``typed``: the options it gave; ``built``: the
    settings it builds): the run's own pass (its checkpoint holds what they became).

    >>> run = RunSettings(output="runs/demo")
    >>> refuse_other_vectors(replace(run, embeddings="count"), run, {"embeddings"})
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: runs/demo started from word vectors none, this command gives count: a resumed run \
continues from its checkpoint; drop embeddings or give its own
    """
    built, trained = built.anchored(), trained.anchored()
    if built.init_from and built.init_from != trained.init_from:  # (no recipe gives one: it was typed)
        raise AttnclfError(f"{trained.output} started from {trained.init_from or 'no pretrained encoder'}, this "
                           f"command gives {named('init_from')} {built.init_from}: a resumed run continues from its "
                           f"checkpoint; drop {named('init_from')} or give its own")
    if not typed & {"embeddings", "embeddings_std"}:
        return
    if (built.embeddings, built.embeddings and built.embeddings_std) != \
            (trained.embeddings, trained.embeddings and trained.embeddings_std):
        raise AttnclfError(f"{trained.output} started from word vectors {trained.embeddings or 'none'}"
                           f"{f' (std {trained.embeddings_std:g})' if trained.embeddings else ''}, this command gives "
                           f"{built.embeddings or 'none'}: a resumed run continues from its checkpoint; drop "
                           f"{named('embeddings')} or give its own")


def _check_run_device(settings: RunSettings, named: Callable[[str], str]) -> None:
    """The device a resumed run trained on, which this machine may lack: say how to continue here."""
    from .device import resolve_device

    try:
        resolve_device(settings.device)
    except AttnclfError:
        raise AttnclfError(f"{settings.output} trained on {settings.device}, which this machine lacks; add "
                           f"{named('device')} cpu (or auto) to continue it here") from None
