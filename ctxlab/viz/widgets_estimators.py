"""`EstimatorLab`: pick token estimators and a reference tokenizer, see the errors by class.

The lab holds a source (a transcript or corpus), the estimators offered and chosen,
and the reference; `errors` is `ctxlab.estimator_errors_df` of the chosen ones, and
the view shows it as two small tables (mean absolute error per part, error of the
total) beside `ctxlab.viz.plot_estimators`. Comparisons are cached per reference and
estimator, so switching back and forth costs nothing after the first time.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.tokens import Estimator, estimator as get_estimator
from ctxlab.tokens.accuracy import PartsSource, compare_estimators_df, estimator_errors_df
from ctxlab.tokens.content import CLASSES
from ctxlab.viz.widgets_base import WidgetView, error_html, frame_html
from ctxlab.wording import counted

if TYPE_CHECKING:
    import ipywidgets

DEFAULT_ESTIMATORS = ("chars:4", "neurolink:anthropic", "neuron", "langchain", "probe")
OFFLINE_REFERENCES = ("tiktoken:o200k_base", "tiktoken:cl100k_base", "llama3")
"""Exact tokenizers that work with no network (their data ships with installed packages)."""
ERROR_COLUMNS = ("estimator", "parts", "ref_tokens", "est_tokens", "mape_pct", "bias_pct",
                 "p95_abs_error_pct", "total_error_pct")


class EstimatorLab(WidgetView):
    """Token estimators against an exact tokenizer, per content class, in a notebook.

    Args:
        source: a transcript or corpus (anything `ctxlab.compare_estimators_df` takes).
        estimators: specs or instances offered; all are chosen at first.
        reference: the exact tokenizer taken as truth.
        references: the references offered (default: the offline exact tokenizers).
        by: the grouping column, ``content_class`` or ``kind``.

    Example:
        >>> import ctxlab, ctxlab.datasets
        >>> lab = EstimatorLab(ctxlab.load(ctxlab.datasets.path("coding_session")),
        ...                    estimators=["chars:4", "neuron"])
        >>> lab.set_estimators(["neuron"])
        >>> sorted(set(lab.errors()["estimator"]))
        ['neuron']
    """

    def __init__(self, source: PartsSource, estimators: Sequence[str | Estimator] = (
            DEFAULT_ESTIMATORS), reference: str | Estimator = "tiktoken:o200k_base", *,
            references: Sequence[str | Estimator] = OFFLINE_REFERENCES,
            by: str = "content_class") -> None:
        if by not in ("content_class", "kind"):
            raise ConfigError(f"by must be 'content_class' or 'kind', not {by!r}")
        self._source = source
        self._by = by
        self._instances: dict[str, Estimator] = {}
        self._options = self._specs(estimators)
        self._chosen = self._options
        ref = self._specs([reference])[0]
        offered = (r.strip() if isinstance(r, str) else self._specs([r])[0] for r in references)
        self._references = tuple(dict.fromkeys((ref, *offered)))  # loaded when chosen
        self._reference = ref
        self._cache: dict[tuple[str, str], pd.DataFrame] = {}
        self._error: str | None = None
        self._w: dict[str, Any] = {}
        self._syncing = False

    def _specs(self, specs: Sequence[str | Estimator]) -> tuple[str, ...]:
        if isinstance(specs, (str, Estimator)):
            raise ConfigError(f"give a list of estimator specs, not the single {specs!r}")
        out = []
        for s in specs:
            est = get_estimator(s)  # raises ConfigError naming the known families
            self._instances[est.spec] = est
            out.append(est.spec)
        return tuple(dict.fromkeys(out))

    @property
    def estimators(self) -> tuple[str, ...]:
        """The chosen estimators' specs."""
        return self._chosen

    @property
    def options(self) -> tuple[str, ...]:
        """Every estimator offered."""
        return self._options

    @property
    def reference(self) -> str:
        return self._reference

    def set_estimators(self, specs: Sequence[str | Estimator]) -> None:
        """Choose the estimators to compare (new specs are added to the options)."""
        chosen = self._specs(specs)
        self._options = tuple(dict.fromkeys((*self._options, *chosen)))
        self._chosen = chosen
        self._refresh()

    def set_reference(self, spec: str | Estimator) -> None:
        """Take another exact tokenizer as truth (a new one is added to the references)."""
        ref = self._specs([spec])[0]
        self._references = tuple(dict.fromkeys((*self._references, ref)))
        self._reference = ref
        self._refresh()

    def compared(self) -> pd.DataFrame:
        """`ctxlab.compare_estimators_df` rows of the chosen estimators (cached)."""
        ref = self._instances.get(self._reference) or get_estimator(self._reference)
        frames = []
        for spec in self._chosen:
            key = (self._reference, spec)
            if key not in self._cache:
                self._cache[key] = compare_estimators_df(self._source, [self._instances[spec]],
                                                         reference=ref)
            frames.append(self._cache[key])
        if not frames:
            return compare_estimators_df(self._source, [], reference=ref).iloc[0:0]
        return pd.concat(frames, ignore_index=True)

    def errors(self) -> pd.DataFrame:
        """`ctxlab.estimator_errors_df` of the chosen estimators, by the grouping column."""
        compared = self.compared()
        if compared.empty:
            cols = list(ERROR_COLUMNS)
            return pd.DataFrame(columns=[cols[0], self._by, *cols[1:]])
        return estimator_errors_df(compared, by=self._by)

    def pivot(self, value: str = "mape_pct") -> pd.DataFrame:
        """One error column of `errors` as a table: a row per group (then ``all``), a column
        per estimator, plus the parts per group."""
        errs = self.errors()
        if errs.empty:
            return pd.DataFrame({self._by: pd.Series([], dtype="string")})
        table = errs.pivot(index=self._by, columns="estimator", values=value)
        groups = [g for g in (*CLASSES, "all") if g in table.index] if \
            self._by == "content_class" else [*sorted(set(table.index) - {"all"}), "all"]
        table = table.reindex(index=groups, columns=list(self._chosen))
        parts = errs.drop_duplicates(self._by).set_index(self._by)["parts"]
        table.insert(0, "parts", parts.reindex(groups).astype("int64"))
        table.columns.name = None
        return table.reset_index()

    def _tables_html(self) -> str:
        if not self._chosen:
            return "<p>Choose at least one estimator.</p>"
        return (f"<p><b>Mean absolute error per part (%)</b> against "
                f"{html.escape(self._reference)}</p>" + frame_html(self.pivot("mape_pct"))
                + "<p><b>Error of the summed tokens (%)</b> — what a budget check feels "
                "(negative: under-estimates)</p>" + frame_html(self.pivot("total_error_pct")))

    def figure(self) -> Any:
        """`ctxlab.viz.plot_estimators` of the chosen estimators."""
        from ctxlab.viz.plots import plot_estimators
        return plot_estimators(self.compared(), by=self._by)

    def static_html(self, *, full: bool = True) -> str:
        """The lab as plain HTML: the error tables and (``full``) the figure as inline SVG."""
        out = [f"<div><h4>Estimator lab: {counted(len(self._chosen), 'estimator')} against "
               f"{html.escape(self._reference)}</h4>", self._tables_html()]
        if full and self._chosen:
            from ctxlab.viz.style import figure_svg
            svg = figure_svg(self.figure())
            out.append(svg[svg.index("<svg"):])
        return "\n".join(out) + "</div>"

    def _build(self) -> ipywidgets.Widget:
        import ipywidgets as w

        w_est = w.SelectMultiple(options=self._options, value=self._chosen,
                                 rows=min(8, max(3, len(self._options))),
                                 description="estimators")
        w_ref = w.Dropdown(options=self._references, value=self._reference,
                           description="reference")
        self._w = {"estimators": w_est, "reference": w_ref, "status": w.HTML(),
                   "tables": w.HTML(), "figure": w.Image(format="png",
                                                         layout=w.Layout(width="100%"))}
        w_est.observe(lambda c: self._guard(self.set_estimators, list(c["new"])), names="value")
        w_ref.observe(lambda c: self._guard(self.set_reference, c["new"]), names="value")
        body = w.HBox([w.Box([self._w["tables"]], layout=w.Layout(width="45%")),
                       w.Box([self._w["figure"]], layout=w.Layout(width="55%"))])
        return w.VBox([w.HBox([w_est, w_ref]), self._w["status"], body])

    def _refresh(self) -> None:
        if not self._w:
            return
        w = self._w
        self._syncing = True
        try:
            w["estimators"].options = self._options
            w["estimators"].value = self._chosen
            w["reference"].options = self._references
            w["reference"].value = self._reference
        finally:
            self._syncing = False
        w["status"].value = error_html(self._error) if self._error else ""
        self._error = None
        w["tables"].value = self._tables_html()
        if self._chosen:
            from ctxlab.viz.style import figure_png
            w["figure"].value = figure_png(self.figure())
            w["figure"].layout.display = None
        else:
            w["figure"].layout.display = "none"

    def __repr__(self) -> str:
        return (f"EstimatorLab({list(self._chosen)}, reference={self._reference!r}, "
                f"by={self._by!r})")


__all__ = ["DEFAULT_ESTIMATORS", "OFFLINE_REFERENCES", "EstimatorLab"]
