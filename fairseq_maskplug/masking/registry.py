"""The mask-policy registry: ``@register_mask_policy("name", dataclass=Options)``.

A policy chooses which positions of one sequence are predicted. Its options are a
plain dataclass whose fields carry ``metadata={"help": ...}`` and, for numbers,
``"range": "(0, 1]"`` (checked when the policy is built); the policy is built from an
instance of it, ``Policy(Options(...))``, and reads nothing else, so a script or a
notebook builds one without any task. Every task that accepts ``--mask-policy`` exposes
the options of every registered policy as its own command-line flags (``my_rate``
becomes ``--my-rate``) and maps its configuration onto the policy's dataclass
(:func:`policy_options`), so a policy registered by a user's ``--user-dir`` module works
with every task. Option names are global: two policies may not declare the same field.
"""

import copy
import dataclasses
from types import SimpleNamespace
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Type

import numpy as np

from ..common.option_ranges import Interval, check_ranges
from .feedback import Feedback
from .fully_explored import bernoulli_views
from .values import FINITE, ValueRule


#: the side information a policy with :attr:`MaskPolicy.budgets_tokens` finds under ``--mask-unit word``: the
#: number of tokens of each word
WORD_TOKENS = "word_tokens"
#: the side information a policy with :attr:`MaskPolicy.reads_words` finds when it chooses tokens: the word each
#: token belongs to (0, 1, ... in order; :func:`~.words.word_ids`)
WORD_IDS = "word_ids"


class MaskPolicy:
    """Base class of all policies.

    Args:
        options: an instance of the options dataclass the policy was registered with (None: its
            defaults); the policy reads only these (``options.mask_prob`` for ``random``, ...).
            :func:`build_mask_policy` maps a task configuration onto it.
    """

    #: the name it is registered under (set by :func:`register_mask_policy`)
    registered_name: str = ""

    #: True when runs of chosen positions are units (spans, entities): text-to-text tasks
    #: then collapse each run into one ``<mask>`` by default (``--collapse-spans``)
    chooses_spans: bool = False

    def __init__(self, options=None):
        declared = MASK_POLICY_DATACLASS_REGISTRY.get(self.registered_name)
        if declared is not None:
            if options is None:
                options = declared()
            elif not isinstance(options, declared):
                raise TypeError(f"mask policy {self.registered_name!r} is built from a {declared.__name__}, got "
                                f"{type(options).__name__}; build_mask_policy({self.registered_name!r}, cfg) "
                                "maps a task configuration onto it")
            check_ranges(options, declared)  # numbers in their declared ranges (:mod:`..option_ranges`)
        self.options = options

    @property
    def cfg(self):
        """The old name of :attr:`options` (policies written before options became their own read ``self.cfg``)."""
        return self.options

    #: the option naming another policy that this one runs (``matched_random``: ``matched_policy``); None: none.
    #: :meth:`build` then receives that policy, built from the same settings
    wraps_option: Optional[str] = None

    @classmethod
    def build(cls, options, wrapped: Optional["MaskPolicy"] = None) -> "MaskPolicy":
        """The policy from its options and, for a policy with :attr:`wraps_option`, the policy it runs."""
        return cls(options)

    @property
    def side_info_names(self) -> Sequence[str]:
        """Names of the per-token side-information tracks ``choose`` reads."""
        return ()

    @property
    def side_info_rules(self) -> Mapping[str, ValueRule]:
        """What each track may hold, checked over the whole split when it is loaded (default: finite)."""
        return {name: FINITE for name in self.side_info_names}

    #: the command that writes this policy's tracks, with ``{data}``, ``{split}`` (and ``{track}``, where the
    #: producer's default name is not the policy's) to fill in and upper-case words for the user; a missing
    #: track's message names it (:meth:`producer_command`); "" for none
    producer: str = ""

    def producer_command(self, track: str) -> str:
        """:attr:`producer` for ``track`` (``{data}`` and ``{split}`` left to fill in), with ``--name TRACK`` where
        the policy reads the track under another name than its default (the producers write the default)."""
        if not self.producer or "{track}" in self.producer:
            return self.producer.replace("{track}", track)
        try:
            defaults = type(self)().side_info_names
        except (TypeError, ValueError):  # a policy that cannot be built from its defaults alone
            defaults = ()
        return self.producer if track in defaults else f"{self.producer} --name {track}"

    def choose(self, tokens: np.ndarray, maskable: np.ndarray,
               side_info: Mapping[str, np.ndarray], rng: np.random.Generator) -> np.ndarray:
        """Return a boolean array, True at the positions to predict.

        Args:
            tokens: token ids of one sequence (1-D).
            maskable: True where a token may be chosen (False at special tokens);
                the result must be False wherever this is False.
            side_info: one array per name in ``side_info_names``, aligned with ``tokens``.
            rng: the generator for this (seed, epoch, index); the only source of
                randomness a policy may use.
        """
        raise NotImplementedError

    #: the option holding this policy's mask rate, which ``--mask-prob-schedule`` sets (None: no rate)
    rate_option: Optional[str] = None

    #: ``--mask-unit word`` (:mod:`.words`): how each side-information track combines over a word's
    #: subwords (``first``, ``max``, ``min``, ``sum``, ``prod``) when the policy runs on the word sequence
    word_reductions: Mapping[str, str] = {}

    #: ``--mask-unit word``: True when the policy chooses tokens and every word it touches is predicted
    #: whole (spans whose units are given, not drawn at a rate); False: it runs on the word sequence
    words_by_expansion: bool = False

    #: ``--mask-unit word``, on the word sequence: True when the policy budgets tokens, not words; it then finds
    #: each word's token count in ``side_info[WORD_TOKENS]`` (absent when it runs on tokens)
    budgets_tokens: bool = False

    #: True when the policy, choosing tokens (``--mask-unit token``), reads each token's word in
    #: ``side_info[WORD_IDS]`` (Difference-Masking's ``rank``: words ranked, pieces drawn); the task and the
    #: Hugging Face collator then give it (:class:`~.words.TokenWordsPolicy`)
    reads_words: bool = False

    #: True when the 80/10/10 replacement draws one fate per unit of :meth:`units` (``pmi``), not per token
    corrupts_units: bool = False

    def replacement(self, tokens: np.ndarray, maskable: np.ndarray,
                    side_info: Mapping[str, np.ndarray]) -> Optional[Tuple[float, float]]:
        """``(leave_unmasked_prob, random_token_prob)`` for this sequence's chosen positions in place of the run's
        (``--leave-unmasked-prob``, ``--random-token-prob``), or None (the run's; the default). Self-Evolution's
        hard tokens all become ``<mask>`` (``(0, 0)``) where its random fallback keeps the run's. Read with the
        sequence's tokens (also under ``--mask-unit word``)."""
        return None

    def units(self, tokens: np.ndarray, maskable: np.ndarray,
              side_info: Mapping[str, np.ndarray]) -> Optional[np.ndarray]:
        """The unit each position belongs to (integers, equal within a unit) when the policy chooses
        whole units (n-grams, words), else None (each token is a unit). Logged as ``unit_mask_rate``."""
        return None

    #: why ``--task fe_mlm`` refuses this policy (one line), for a policy whose K disjoint views
    #: cannot have its own mask distribution; None: see :meth:`defines_views`
    views_refused: Optional[str] = None

    def probabilities(self, tokens: np.ndarray, maskable: np.ndarray,
                      side_info: Mapping[str, np.ndarray]) -> Optional[np.ndarray]:
        """Per-token inclusion probabilities ``p_i`` when :meth:`choose` masks every token
        independently with probability ``p_i`` (``l3``); None (the default) otherwise. With
        them, :meth:`views` draws fully-explored views that each have exactly this policy's
        mask distribution (:func:`~fairseq_maskplug.masking.fully_explored.bernoulli_views`)."""
        return None

    def views(self, tokens: np.ndarray, maskable: np.ndarray, side_info: Mapping[str, np.ndarray],
              rng: np.random.Generator, k: int) -> np.ndarray:
        """``k x len`` pairwise-disjoint masks for ``--task fe_mlm --mask-policy NAME`` (Zheng et
        al.). Default: from :meth:`probabilities`; a policy without them overrides this to
        define its views, or is refused by ``fe_mlm`` (:meth:`defines_views`)."""
        p = self.probabilities(tokens, maskable, side_info)
        if p is None:
            raise NotImplementedError(f"mask policy {self.registered_name!r} defines no fully-explored views")
        return bernoulli_views(p, k, rng)

    #: a policy that learns from training (:mod:`.feedback`) reads :attr:`state`, set by :meth:`with_state`
    feedback: Optional[Feedback] = None
    #: the statistics training left (None: :attr:`feedback`'s initial ones)
    state: Optional[np.ndarray] = None

    def with_state(self, state: np.ndarray) -> "MaskPolicy":
        """This policy drawing with the statistics ``state`` (:mod:`.feedback`); ``self`` is unchanged."""
        changed = copy.copy(self)
        changed.state = np.array(state, dtype=np.float64)
        return changed

    @classmethod
    def defines_views(cls) -> bool:
        """Whether ``fe_mlm`` can use this policy: it defines :meth:`probabilities` or :meth:`views`
        and has no :attr:`views_refused` reason."""
        return cls.views_refused is None and (cls.probabilities is not MaskPolicy.probabilities
                                              or cls.views is not MaskPolicy.views)


class PolicyWrapper(MaskPolicy):
    """A policy that runs another one, :attr:`inner` (``matched_random`` its reference, ``--mask-unit word``
    the policy it makes choose whole words). The one protocol they delegate: a wrapper reads what ``inner``
    reads (its side-information tracks, their rules, how they combine over a word's subwords); everything
    about what it chooses is its own.

    Args:
        options: the wrapper's own options (see :class:`MaskPolicy`).
        inner: the policy it runs.
    """

    def __init__(self, options, inner: MaskPolicy):
        super().__init__(options)
        self.inner = inner

    feedback = property(lambda self: self.inner.feedback)

    def with_state(self, state):
        """The wrapper running ``inner.with_state(state)``."""
        changed = copy.copy(self)
        changed.inner = self.inner.with_state(state)
        return changed

    side_info_names = property(lambda self: self.inner.side_info_names)
    side_info_rules = property(lambda self: self.inner.side_info_rules)
    budgets_tokens = property(lambda self: self.inner.budgets_tokens)

    word_reductions = property(lambda self: self.inner.word_reductions)

    def producer_command(self, track):
        return self.inner.producer_command(track)

    def replacement(self, tokens, maskable, side_info):
        """The wrapped policy's (its chosen positions are the wrapper's: ``--mask-unit word``, its token words)."""
        return self.inner.replacement(tokens, maskable, side_info)


class TrackPolicy(MaskPolicy):
    """A policy that reads one side-information track, the one its option :attr:`track_option` names: the track's
    values follow :attr:`track_rule`, and under ``--mask-unit word`` a word's value is :attr:`track_reduction` of
    its pieces' (None: the policy does not run on words)."""

    #: the option naming the track (``"l3_track"``)
    track_option: str = ""
    #: what the track's values must be
    track_rule: ValueRule = FINITE
    #: ``first``, ``max``, ``min``, ``sum`` or ``prod`` (:mod:`.words`); None: no word reduction
    track_reduction: Optional[str] = None

    @property
    def track(self) -> str:
        """The track's name, from the policy's options."""
        return getattr(self.options, self.track_option)

    @property
    def side_info_names(self):
        return (self.track,)

    @property
    def side_info_rules(self):
        return {self.track: self.track_rule}

    @property
    def word_reductions(self):
        return {} if self.track_reduction is None else {self.track: self.track_reduction}


MASK_POLICY_REGISTRY: Dict[str, Type[MaskPolicy]] = {}
MASK_POLICY_DATACLASS_REGISTRY: Dict[str, Optional[type]] = {}
_REGISTRATION_CALLBACKS: List[Callable[[], None]] = []


def _check_options(name: str, options: type) -> None:
    if not dataclasses.is_dataclass(options):
        raise TypeError(f"options of mask policy {name!r} must be a dataclass, got {options!r}")
    taken = {
        f.name: other
        for other, dc in MASK_POLICY_DATACLASS_REGISTRY.items() if dc is not None
        for f in dataclasses.fields(dc)
    }
    for f in dataclasses.fields(options):
        if f.name in taken:
            raise ValueError(
                f"option {f.name!r} of mask policy {name!r} is already declared by "
                f"mask policy {taken[f.name]!r}; prefix option names with the policy name"
            )
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(f"option {f.name!r} of mask policy {name!r} needs a default")
        if "range" in f.metadata:
            try:
                Interval.parse(f.metadata["range"])
            except ValueError as error:
                raise ValueError(f"option {f.name!r} of mask policy {name!r}: metadata['range'] {error}") from None
        if not f.metadata.get("help"):
            raise ValueError(f"option {f.name!r} of mask policy {name!r} needs help text "
                             "(field(..., metadata={'help': ...}))")
        if isinstance(f.type, str):
            raise TypeError(f"option {f.name!r} of mask policy {name!r} has a string annotation; "
                            "fairseq needs real types (drop 'from __future__ import annotations')")


def register_mask_policy(name: str, dataclass: Optional[type] = None):
    """Class decorator registering a :class:`MaskPolicy` under ``name``."""

    def register(cls):
        if name in MASK_POLICY_REGISTRY:
            raise ValueError(f"mask policy {name!r} is already registered "
                             f"({MASK_POLICY_REGISTRY[name].__qualname__})")
        if not (isinstance(cls, type) and issubclass(cls, MaskPolicy)):
            raise TypeError(f"mask policy {name!r} must subclass MaskPolicy")
        if dataclass is not None:
            _check_options(name, dataclass)
        cls.registered_name = name
        MASK_POLICY_REGISTRY[name] = cls
        MASK_POLICY_DATACLASS_REGISTRY[name] = dataclass
        for callback in _REGISTRATION_CALLBACKS:
            callback()
        return cls

    return register


def policy_option_dataclasses() -> List[type]:
    """Option dataclasses of all registered policies, in registration order."""
    return [dc for dc in MASK_POLICY_DATACLASS_REGISTRY.values() if dc is not None]


def policies_read(name: str, settings=None) -> List[str]:
    """Registered names of the policies whose options ``--mask-policy name`` reads under ``settings``: itself,
    and, for a policy that runs another (:attr:`MaskPolicy.wraps_option`), that one's, recursively. Options of
    every other policy are refused when set (:func:`ignored_policy_options`)."""
    names = [_registered(name).registered_name]
    while True:
        option = MASK_POLICY_REGISTRY[names[-1]].wraps_option
        if option is None:
            return names
        inner = getattr(settings, option, None) or getattr(policy_options(names[-1], None), option)
        if inner in names:
            raise ValueError(f"--{option.replace('_', '-')} {inner}: mask policy {names[-1]!r} cannot run "
                             f"{'itself' if inner == names[-1] else repr(inner) + ', which runs it'}; "
                             "name another policy")
        names.append(_registered(inner).registered_name)


def ignored_policy_options(name: str, cfg) -> List[Tuple[str, str]]:
    """``(flag, owning policy)`` for each option of a registered policy that ``--mask-policy name``
    does not read but whose value in ``cfg`` differs from the default: an option set for nothing."""
    read = set(policies_read(name, cfg))
    flags = []
    for name, options in MASK_POLICY_DATACLASS_REGISTRY.items():
        if options is None or name in read:
            continue
        for f in dataclasses.fields(options):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            if getattr(cfg, f.name, default) != default:
                flags.append(("--" + f.name.replace("_", "-"), name))
    return flags


def on_policy_registered(callback: Callable[[], None]) -> None:
    """Call ``callback()`` after every later registration (tasks refresh their options)."""
    _REGISTRATION_CALLBACKS.append(callback)


def _registered(name: str) -> Type[MaskPolicy]:
    if name not in MASK_POLICY_REGISTRY:
        raise ValueError(f"unknown mask policy {name!r}; registered: {sorted(MASK_POLICY_REGISTRY)} "
                         "(a plugin's policies need its module loaded, e.g. with --user-dir)")
    return MASK_POLICY_REGISTRY[name]


def policy_options(name: str, settings=None):
    """The options of policy ``name`` taken from ``settings``: an instance of its dataclass (returned as it
    is), any object with the options as attributes (a task configuration, an argparse namespace; a field it
    lacks keeps its default), or None (the defaults). None for a policy registered without options."""
    declared = MASK_POLICY_DATACLASS_REGISTRY[_registered(name).registered_name]
    if declared is None or isinstance(settings, declared):
        return settings if declared is not None else None
    given = {f.name: getattr(settings, f.name) for f in dataclasses.fields(declared) if hasattr(settings, f.name)}
    return declared(**given)


def options_at_rate(name: str, options, rate: float):
    """``options`` of policy ``name`` with its mask rate (:attr:`MaskPolicy.rate_option`) replaced by ``rate``:
    how ``--mask-prob-schedule`` sets the rate a policy draws at."""
    rate_option = _registered(name).rate_option
    if rate_option is None:
        raise ValueError(f"mask policy {name!r} has no rate option (what --mask-prob-schedule and a collator's "
                         "mlm_probability set); give its own options instead")
    return dataclasses.replace(options, **{rate_option: rate})


def check_option_names(name: str, options: Mapping) -> None:
    """Refuse a key of ``options`` (a dict a script wrote) that no policy ``name`` builds reads (it and the policies
    it runs, :func:`policies_read`): a misspelt option, or another policy's, would otherwise be ignored."""
    names = policies_read(name, SimpleNamespace(**options))
    known = {f.name for inner in names if MASK_POLICY_DATACLASS_REGISTRY[inner] is not None
             for f in dataclasses.fields(MASK_POLICY_DATACLASS_REGISTRY[inner])}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"mask policy {name!r} reads no option {unknown[0]!r} (its options: "
                         f"{', '.join(sorted(known)) or 'none'})")


def build_mask_policy(name: str, settings=None, rate: Optional[float] = None) -> MaskPolicy:
    """The policy registered as ``name``, built from its options in ``settings`` (:func:`policy_options`, or a dict),
    with its rate replaced by ``rate`` when given (:func:`options_at_rate`); a policy that runs another
    (:attr:`MaskPolicy.wraps_option`) gets that one built from the same settings."""
    if isinstance(settings, Mapping):  # a dict of options, as a script writes them
        settings = SimpleNamespace(**settings)
    names = policies_read(name, settings)  # refuses unknown names and circles first
    policy = None
    for inner in reversed(names):
        options = policy_options(inner, settings)
        if rate is not None and inner == names[0]:
            options = options_at_rate(inner, options, rate)
        policy = MASK_POLICY_REGISTRY[inner].build(options, policy)
    return policy
