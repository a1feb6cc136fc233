"""What every ctxlab figure shares: colours, a new figure, and deterministic SVG/PNG bytes.

Colours are the Okabe–Ito palette (distinguishable with the common colour-vision
deficiencies). `figure_svg` and `figure_png` render a figure to text/bytes that depend
only on what was drawn — no dates, no software version, no random ids — so reports and
notebooks can be compared byte for byte. matplotlib is imported inside the functions.
"""

from __future__ import annotations

import functools
import io
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd

from ctxlab.wording import counted

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#000000")
LAYER_COLOURS = {"system": "#0072B2", "tools": "#E69F00", "carried": "#56B4E9",
                 "current": "#009E73", "history": "#CC79A7", "prompt": "#D55E00"}
"""One colour per layer of `ctxlab.layers.LAYERS`, in stacking order."""
FRAMING_COLOUR = "#BBBBBB"
NEUTRAL = ("#999999", "#555555")
MISSING_COLOUR = "#000000"
"""What a figure marks as lost (a call missing needed facts): black, which no stage or
preset colour is (`COLOURS` leaves the palette's black out)."""
SVG_SALT = "ctxlab"


F = TypeVar("F", bound=Callable[..., Any])


def literal_text(fn: F) -> F:
    """Draw every text the function makes as written: a ``$`` in a session id, a model or
    a preset name is not TeX (two of them made matplotlib parse the text between, and a
    backslash there failed the whole figure). Texts made outside are left alone."""
    @functools.wraps(fn)
    def drawn(*args: Any, **kwargs: Any) -> Any:
        import matplotlib

        with matplotlib.rc_context({"text.parse_math": False}):
            return fn(*args, **kwargs)
    return drawn  # type: ignore[return-value]


def session_label(session: str) -> str:
    """A session id short enough for a title and still telling sessions apart: whole up
    to 24 characters; a UUID as its first 8 characters (a time-ordered one with its last
    4 too; a sub-agent's, ``<id>/<agent>``, with the agent); another long id with its
    middle cut, keeping its end, where ids of one run differ (``astropy__astropy-12907``
    and ``astropy__astropy-13033`` are two SWE-bench tasks; their first 8 characters are
    one).

    Example:
        >>> session_label("chat-history:15")
        'chat-history:15'
        >>> session_label("fe5e1c67-53e7-4862-9d0b-1c2d3e4f5a6b")
        'fe5e1c67'
        >>> session_label("01996135-afde-7911-8a3c-4b5d6e7f8a9b")
        '01996135…8a9b'
        >>> session_label("fe5e1c67-53e7-4862-9d0b/agent-a1b2c3d4")
        'fe5e1c67/agent-a1b2c3d4'
        >>> session_label("scikit-learn__scikit-learn-25747"), session_label("x" * 30)
        ('scikit-lea…t-learn-25747', 'xxxxxxxxxx…xxxxxxxxxxxxx')
    """
    if len(session) <= LABEL_CHARS:
        return session
    head, _, rest = session.partition("/")
    if _UUID_HEAD.match(head):
        # a time-ordered UUID (version 7, Codex's) opens with its time: its first 8
        # characters are one for sessions started within a minute, its last 4 are not
        head = f"{head[:8]}…{head[-4:]}" if head[14:15] == "7" else head[:8]
    elif len(head) > LABEL_CHARS:
        keep = LABEL_CHARS - 1          # characters around the ellipsis
        head = f"{head[:keep // 2 - 1]}…{head[-(keep - keep // 2 + 1):]}"
    return f"{head}/{rest.rsplit('/', 1)[-1][:24]}" if rest else head


LABEL_CHARS = 24
"""A session id up to this long is shown whole (`session_label`)."""
_UUID_HEAD = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-")


def new_figure(ax: Axes | None, size: tuple[float, float]) -> tuple[Figure, Axes]:
    """``ax``'s figure and ``ax``, or a new constrained-layout figure with one axes."""
    if ax is not None:
        fig = ax.get_figure()
        assert fig is not None
        return getattr(fig, "figure", fig), ax  # a subfigure's root figure
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.add_subplot()


MORE_COLOURS = ("#882255", "#44AA99", "#999933", "#332288", "#AA4499", "#117733", "#DDCC77",
                "#661100")
"""After the palette's seven colours (black kept for lines): Paul Tol's muted colours."""


COLOURS = (*PALETTE[:-1], *MORE_COLOURS)
"""Colours for stages and presets: the palette without black (black marks what is lost,
and lines), then `MORE_COLOURS`."""
STAGE_NAMES = ("prune", "dedup", "clear_tool_results", "summarize", "truncate", "keep_last",
               "monologue", "truncate_tool_output", "trim_history", "file_budget",
               "carry_forward", "reattach", "repair")
"""The built-in stages, each with a colour of its own (`COLOURS`, in this order; the
palette's faint yellow is left for names ctxlab does not know)."""
PRESET_NAMES = ("neurolink", "probe", "ai-agent", "copilot-legacy", "copilot-fixed", "neuron",
                "observation-masking", "claude-code")
"""The presets, each with a colour of its own, as `STAGE_NAMES`."""
_FIXED_ORDER = tuple(c for c in COLOURS if c != "#F0E442") + ("#F0E442",)


def named_colours(names: Iterable[str], fixed: Sequence[str]) -> dict[str, str]:
    """A colour per name: a name of ``fixed`` has its own, the same in every figure and
    notebook whatever else is drawn with it; any other name takes the colours no name of
    ``fixed`` here uses, in the order given (then they repeat).

    Example:
        >>> cs = named_colours(["summarize", "mine", "prune"], STAGE_NAMES)
        >>> cs["prune"] == named_colours(["prune"], STAGE_NAMES)["prune"]
        True
        >>> len(set(cs.values()))
        3
    """
    names = list(dict.fromkeys(names))
    out = {n: _FIXED_ORDER[fixed.index(n) % len(_FIXED_ORDER)] for n in names if n in fixed}
    free = [c for c in _FIXED_ORDER[::-1] if c not in out.values()] or list(_FIXED_ORDER)
    for i, name in enumerate(n for n in names if n not in out):
        out[name] = free[i % len(free)]
    return {n: out[n] for n in names}


def stage_colours(names: Iterable[str]) -> dict[str, str]:
    """A colour per stage name (`named_colours` of `STAGE_NAMES`).

    Example:
        >>> stage_colours(["dedup", "prune"]) == {"dedup": "#E69F00", "prune": "#0072B2"}
        True
    """
    return named_colours(names, STAGE_NAMES)


def preset_colours(names: Iterable[str]) -> dict[str, str]:
    """A colour per preset name (`named_colours` of `PRESET_NAMES`)."""
    return named_colours(names, PRESET_NAMES)


ESTIMATOR_COLOURS = {
    "chars": "#0072B2", "neurolink": "#E69F00", "neuron": "#009E73", "langchain": "#CC79A7",
    "probe": "#56B4E9", "tiktoken": "#D55E00", "tiktoken:cl100k_base": "#882255",
    "llama3": "#661100", "mistral": "#44AA99", "hf": "#117733", "calibrated": "#332288",
    "calibrated-upper": "#AA4499", "max": "#999933", "reported": "#000000"}
"""A colour per built-in estimator family (`ctxlab.tokens.names()`), the same in every
figure: the family's default spec (`ESTIMATOR_DEFAULTS`) always has it, another spec of
the family has it when drawn without a sibling (`estimator_colours`).
``tiktoken:cl100k_base``, the offline reference drawn beside ``tiktoken:o200k_base``,
has its own. ``reported`` (what the provider billed) is black, as in every figure; no
estimator is black or grey."""
ESTIMATOR_DEFAULTS = {"chars": "chars:4", "neurolink": "neurolink:anthropic",
                      "tiktoken": "tiktoken:o200k_base", "mistral": "mistral:v3-tekken"}
"""The spec that keeps its family's colour when siblings are drawn with it."""
_SPARE = ("#DDCC77", "#F0E442")
"""Colours of no estimator, light ones: the last a spec without a colour gets."""


def estimator_family(spec: str) -> str:
    """The family a spec (or an in-memory estimator's spec) names.

    Example:
        >>> [estimator_family(s) for s in ("tiktoken:o200k_base", " Chars:3.5",
        ...  "calibrated(reported, *)", "calibrated(reported, *) upper", "max:chars:4,neuron")]
        ['tiktoken', 'chars', 'calibrated', 'calibrated-upper', 'max']
    """
    head = re.match(r"\s*([\w.-]*)", spec)
    family = head.group(1).lower() if head else ""
    if family == "calibrated" and spec.rstrip().endswith(" upper"):
        return "calibrated-upper"       # `Calibrated.upper()` of a calibration in memory
    return family


def _estimator_key(spec: str) -> str:
    """``spec`` as `ESTIMATOR_COLOURS` and `ESTIMATOR_DEFAULTS` spell it: the name in lower
    case, no spaces around the colon; a name without an argument stands for its default."""
    name, sep, arg = spec.strip().partition(":")
    name = name.strip().lower()
    return f"{name}:{arg.strip()}" if sep else ESTIMATOR_DEFAULTS.get(name, name)


def estimator_colours(specs: Iterable[str]) -> dict[str, str]:
    """A colour per estimator spec, distinct within the figure and independent of the order
    of drawing. A spec takes, in this order: its own colour (`ESTIMATOR_COLOURS`); its
    family's, when it is the family's default (so ``chars:4`` is blue in every figure) or
    no other spec of the family drawn here wants it (the first in sorted order wins);
    else, in sorted order, a colour no spec here uses (those of families not drawn, from
    the end of `ESTIMATOR_COLOURS`, then `_SPARE`).

    Example:
        >>> a = estimator_colours(["neuron", "tiktoken:o200k_base", "chars:4"])
        >>> b = estimator_colours(["chars:3.6", "chars:4", "tiktoken:cl100k_base"])
        >>> a["chars:4"] == b["chars:4"] == ESTIMATOR_COLOURS["chars"]
        True
        >>> len(set(b.values())), estimator_colours(["chars:3.6"])["chars:3.6"] == a["chars:4"]
        (3, True)
    """
    specs = list(dict.fromkeys(specs))
    keys = {s: _estimator_key(s) for s in specs}

    def rank(s: str) -> tuple[int, str, str]:   # own colour, family default, other; by name
        k = keys[s]
        return (0 if k in ESTIMATOR_COLOURS else 1 if k in ESTIMATOR_DEFAULTS.values() else 2,
                k, s)

    out: dict[str, str] = {}
    for s in sorted(specs, key=rank):
        colour = ESTIMATOR_COLOURS.get(keys[s]) or ESTIMATOR_COLOURS.get(estimator_family(s))
        if colour is not None and colour not in out.values():
            out[s] = colour
    drawn = {ESTIMATOR_COLOURS.get(estimator_family(s)) for s in specs} | set(out.values())
    black = ESTIMATOR_COLOURS["reported"]
    pool = [c for c in dict.fromkeys(ESTIMATOR_COLOURS.values()) if c != black][::-1]
    pool += _SPARE
    free = [c for c in pool if c not in drawn] or pool
    for i, s in enumerate(sorted((s for s in specs if s not in out), key=rank)):
        out[s] = free[i % len(free)]
    return {s: out[s] for s in specs}


def show_nothing(ax: Axes, message: str) -> None:
    """Say in the middle of an empty axes why nothing is drawn, and hide its meaningless
    ticks (``gid`` ``empty-message``).

    Example:
        >>> from matplotlib.figure import Figure
        >>> ax = Figure().add_subplot(); show_nothing(ax, "no stage ran")
        >>> [t.get_text() for t in ax.texts], ax.get_yticks().tolist()
        (['no stage ran'], [])
    """
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center",
            fontsize=10, color=NEUTRAL[1], wrap=True, gid="empty-message")
    ax.set_xticks([])
    ax.set_yticks([])


def share(part: float, whole: float) -> str:
    """``part / whole`` as a percentage a reader can tell from zero: whole percents, one
    decimal under 10%, two under 1% (``0% saved`` hid 1,300 tokens of 640,000).

    Example:
        >>> share(25, 100), share(1304, 639652), share(0, 10), share(7.5, 100)
        ('25%', '0.20%', '0%', '7.5%')
    """
    v = 100.0 * part / whole
    if v == 0 or abs(v) >= 10:
        return f"{v:.0f}%"
    return f"{v:.1f}%" if abs(v) >= 1 else f"{v:.2f}%"


plural = counted
"""``1 call``, ``2 calls``, ``1,234 calls`` (`ctxlab.wording.counted`)."""


def token_text(tokens: float) -> str:
    """Tokens in a cell or on a colour bar: ``16.9M``, ``74.6k``, ``850``.

    Example:
        >>> token_text(16_881_512), token_text(74_564), token_text(850), token_text(-2e6)
        ('16.9M', '74.6k', '850', '-2.0M')
    """
    if abs(tokens) >= 1_000_000:
        return f"{tokens / 1e6:,.1f}M"
    return thousands(tokens)


def thousands(tokens: float) -> str:
    """``74.6k`` for 74,564 tokens; ``850`` under a thousand.

    Example:
        >>> thousands(74_564), thousands(-23), thousands(1_250_000)
        ('74.6k', '-23', '1,250.0k')
    """
    return f"{tokens / 1000:,.1f}k" if abs(tokens) >= 1000 else f"{tokens:,.0f}"


def figure_svg(fig: Figure) -> str:
    """The figure as SVG text, identical for identical drawings.

    matplotlib names clip paths and other shared elements with random ids unless
    ``svg.hashsalt`` is set, and writes the date into the metadata; here the salt is
    fixed for this one call (``rc_context``, nothing global changes) and the date left
    out.

    Example:
        >>> from matplotlib.figure import Figure
        >>> fig = Figure(figsize=(2, 1)); _ = fig.add_subplot().plot([0, 1], [1, 0])
        >>> figure_svg(fig) == figure_svg(fig)
        True
    """
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": SVG_SALT}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def figure_png(fig: Figure, *, dpi: float = 100) -> bytes:
    """The figure as PNG bytes without metadata (no software version), at ``dpi``.

    Example:
        >>> from matplotlib.figure import Figure
        >>> fig = Figure(figsize=(2, 1)); _ = fig.add_subplot().plot([0, 1], [1, 0])
        >>> png = figure_png(fig)
        >>> png[:4] == b"\\x89PNG" and b"Software" not in png and png == figure_png(fig)
        True
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()


def preview_texts(texts: pd.Series, chars: int) -> pd.Series:
    """Contents as one-line previews: whitespace runs collapsed, cut at ``chars`` with
    "…"; NA stays NA.

    Example:
        >>> preview_texts(pd.Series(["a\\n  b", "x" * 10, None]), 5).tolist()
        ['a b', 'xxxx…', <NA>]
    """
    text = texts.astype("string").str.replace(r"\s+", " ", regex=True).str.strip()
    return text.where(text.str.len() <= chars, text.str.slice(0, chars - 1) + "…")
