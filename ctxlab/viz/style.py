"""What every ctxlab figure shares: colours, a new figure, and deterministic SVG/PNG bytes.

Colours are the Okabe–Ito palette (distinguishable with the common colour-vision
deficiencies). `figure_svg` and `figure_png` render a figure to text/bytes that depend
only on what was drawn — no dates, no software version, no random ids — so reports and
notebooks can be compared byte for byte. matplotlib is imported inside the functions.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd

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
    to 20 characters; a sub-agent's (``<id>/<agent>``) as the id's first 8 characters and
    the agent; else the first 8 characters.

    Example:
        >>> session_label("chat-history:15"), session_label("fe5e1c67-53e7-4862-9d0b")
        ('chat-history:15', 'fe5e1c67')
        >>> session_label("fe5e1c67-53e7-4862-9d0b/agent-a1b2c3d4")
        'fe5e1c67/agent-a1b2c3d4'
    """
    if len(session) <= 20:
        return session
    head, _, rest = session.partition("/")
    return f"{head[:8]}/{rest.rsplit('/', 1)[-1][:24]}" if rest else session[:8]


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


def stage_colours(names: Iterable[str]) -> dict[str, str]:
    """A colour per stage (or preset) name, in the order given: the palette without black,
    then `MORE_COLOURS` (15 distinct colours, then they repeat).

    Example:
        >>> cs = stage_colours(f"p{i}" for i in range(8))
        >>> len(set(cs.values())), cs["p7"]
        (8, '#882255')
    """
    colours = (*PALETTE[:-1], *MORE_COLOURS)
    out: dict[str, str] = {}
    for name in names:
        if name not in out:
            out[name] = colours[len(out) % len(colours)]
    return out


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
