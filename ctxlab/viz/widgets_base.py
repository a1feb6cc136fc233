"""What ctxlab's notebook widgets share: front-end detection, display, HTML tables.

A widget class (`ctxlab.viz.widgets`) keeps its state in plain attributes that its
methods change, so tests drive it without a browser; its ipywidgets controls are built
only when `WidgetView.widget` is first read, and `static_html` renders the same state
as plain HTML (tables and inline SVG) for front ends without a widget manager.
ipywidgets and IPython are imported inside functions only.
"""

from __future__ import annotations

import html
import sys
from typing import TYPE_CHECKING, Any

import pandas as pd

from ctxlab.errors import CtxlabError
from ctxlab.wording import usage_text

if TYPE_CHECKING:
    import ipywidgets

TABLE_STYLE = ("border-collapse:collapse;font-size:12px;font-family:"
               "ui-monospace,SFMono-Regular,Menlo,monospace")


def widget_frontend() -> bool:
    """Whether live widgets can be shown: ipywidgets importable and an IPython kernel running.

    A Jupyter kernel (JupyterLab, Notebook, VS Code) has a ``kernel`` on its IPython
    shell; plain Python, terminal IPython and nbconvert without a kernel do not, and
    get the static HTML instead. IPython is never imported here: without it loaded
    there is no kernel.
    """
    if "IPython" not in sys.modules:
        return False
    try:
        import ipywidgets  # noqa: F401
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def frame_html(df: pd.DataFrame, *, digits: int = 1) -> str:
    """A DataFrame as a compact HTML table (cells escaped, floats to ``digits`` places)."""
    return df.to_html(index=False, border=0, escape=True, na_rep="",
                      float_format=lambda x: f"{x:,.{digits}f}").replace(
        '<table class="dataframe">', f'<table class="dataframe" style="{TABLE_STYLE}">', 1)


def mapping_html(values: dict[str, Any]) -> str:
    """A dict as a two-column HTML table (``key | value``), values formatted and escaped;
    shares (``peak_usage``, ``recall``) as percentages, as the HTML report shows them.

    Example:
        >>> "79.9%" in mapping_html({"peak_usage": 0.799}), "0.799" in mapping_html({"x": 0.799})
        (True, True)
    """
    def fmt(k: str, v: Any) -> str:
        if isinstance(v, bool) or v is None:
            return str(v)
        if isinstance(v, int):
            return f"{v:,}"
        if isinstance(v, float):
            if "usage" in k:
                return usage_text(v)
            if k == "recall":
                return f"{v:.1%}"
            return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)
    frame = pd.DataFrame({"": list(values),
                          "value": [fmt(str(k), v) for k, v in values.items()]})
    return frame_html(frame)


class WidgetView:
    """Base of ctxlab's widgets: a lazily built ipywidgets box and a static HTML fallback.

    Subclasses implement `_build` (the controls, wired to their methods) and
    `static_html`. In a notebook, displaying the object shows the live widget when
    `widget_frontend` says a kernel with ipywidgets is there — the tables ride along as
    HTML in the same output (``static_html(full=False)``: no figures, to stay quick) for
    viewers without a widget manager — and the full static HTML otherwise.
    """

    _box: ipywidgets.Widget | None = None

    @property
    def widget(self) -> ipywidgets.Widget:
        """The ipywidgets box (built on first use; needs ipywidgets)."""
        if self._box is None:
            try:
                import ipywidgets  # noqa: F401
            except ImportError as e:
                from ctxlab.errors import ConfigError
                raise ConfigError("the interactive view needs ipywidgets: pip install "
                                  "ipywidgets (static_html() works without it)") from e
            self._box = self._build()
            self._refresh()
        return self._box

    def _build(self) -> ipywidgets.Widget:
        raise NotImplementedError

    def _guard(self, method: Any, *args: Any) -> None:
        """Run a control's method: a refused value shows in the status line instead of
        raising; ignored while the widget is updating its own controls (``_syncing``)."""
        if getattr(self, "_syncing", False):
            return
        try:
            method(*args)
        except CtxlabError as e:
            self._error = str(e)
            self._refresh()

    def _refresh(self) -> None:
        """Bring the built widget's outputs up to date with the state (no-op before)."""

    def static_html(self, *, full: bool = True) -> str:
        raise NotImplementedError

    def _repr_html_(self) -> str:
        return self.static_html()

    def _ipython_display_(self) -> None:
        from IPython.display import display

        if widget_frontend():
            bundle = self.widget._repr_mimebundle_()
            bundle["text/html"] = self.static_html(full=False)
        else:
            bundle = {"text/html": self.static_html(), "text/plain": repr(self)}
        display(bundle, raw=True)


def error_html(message: str) -> str:
    """A message in red, escaped, for a widget's status line."""
    return f'<span style="color:#B00020">{html.escape(message)}</span>'


__all__ = ["WidgetView", "error_html", "frame_html", "mapping_html", "widget_frontend"]
