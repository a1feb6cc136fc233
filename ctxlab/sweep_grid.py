"""Sweep grids: parameter names and values, expanded into configurations.

A grid maps a name to a list of values; `expand` makes every combination, in the
grid's order (the last name varies fastest). A list of grids is the union of their
combinations, in order, without duplicates (two combinations that make the same pipeline,
window and estimator are one configuration: the first). Names:

* ``preset``: preset names or `Pipeline` instances (default ``["neurolink"]``);
* ``threshold``, ``target``: `Pipeline` fields (None: the preset's own);
* ``window``: context window in tokens (None: each call's model's);
* ``estimator``: estimator spec (None: the pipeline's);
* ``stage.param``, e.g. ``prune.protect_tokens``: a parameter of every stage of that
  name in the pipeline (``always``, ``stages`` and ``post`` alike).

A stage parameter only applies to presets that have the stage. A preset without it is
run once, with the parameter's column NA and a ``note`` saying the parameter was not
applied (so it is never silently run as if it had the values). A stage that no preset
of the grid has is an error.

`parse_spec` reads the command line form: ``threshold=0.6:0.95:0.05`` (start, stop,
step, stop included) or ``preset=neurolink,copilot-fixed``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from decimal import Decimal, InvalidOperation
from typing import Any

from ctxlab.errors import ConfigError
from ctxlab.pipeline import Pipeline, resolve_pipeline, window_note

PIPELINE_FIELDS = ("threshold", "target")
NAMES = ("preset", *PIPELINE_FIELDS, "window", "estimator")
MAX_RANGE_VALUES = 10_000

Grid = Mapping[str, Sequence[Any]]


@dataclass(frozen=True, slots=True)
class Config:
    """One configuration of a sweep (picklable: workers build the pipeline from it).

    Attributes:
        preset: a preset name or a `Pipeline`.
        fields: ``(name, value)`` of changed `Pipeline` fields (threshold, target).
        params: ``(stage, param, value)`` of changed stage parameters.
        window, estimator: the replay's (None: per model / the pipeline's).
        skipped: ``stage.param`` names of the grid that the preset has no stage for.
    """

    preset: str | Pipeline
    fields: tuple[tuple[str, Any], ...] = ()
    params: tuple[tuple[str, str, Any], ...] = ()
    window: int | None = None
    estimator: str | None = None
    skipped: tuple[str, ...] = ()

    def pipeline(self) -> Pipeline:
        """The pipeline this configuration replays."""
        p = resolve_pipeline(self.preset)
        if self.fields:
            p = replace(p, **dict(self.fields))
        for stage_name, param, value in self.params:
            p = with_stage_param(p, stage_name, param, value)
        return p

    def columns(self, stage_names: Sequence[str]) -> dict[str, Any]:
        """The configuration's columns of a results frame (effective values)."""
        p = self.pipeline()
        out: dict[str, Any] = {"preset": p.name, "threshold": p.threshold,
                               "target": p.target if p.target is not None else p.threshold,
                               "window": self.window, "estimator": self.estimator or p.estimator}
        given = {f"{s}.{k}": v for s, k, v in self.params}
        out.update({name: given.get(name) for name in stage_names})
        notes = [f"{n} not applied: {p.name} has no {n.split('.')[0]} stage"
                 for n in self.skipped]
        fixed = window_note(p, self.window)
        out["note"] = "; ".join(notes + ([fixed] if fixed else [])) or None
        return out


def with_stage_param(p: Pipeline, stage_name: str, param: str, value: Any) -> Pipeline:
    """``p`` with ``param`` set on every stage called ``stage_name``.

    Example:
        >>> from ctxlab.presets import preset
        >>> p = with_stage_param(preset("neurolink"), "prune", "protect_tokens", 5)
        >>> p.stages[0].protect_tokens
        5
    """
    found = False
    lists = {}
    for attr in ("always", "stages", "enforce", "post"):
        new = []
        for s in getattr(p, attr):
            if s.name == stage_name:
                names = [f.name for f in fields(s)]
                if param not in names:
                    raise ConfigError(f"stage {stage_name!r} has no parameter {param!r}; "
                                      f"its parameters: {', '.join(names)}")
                if value is not None or not _takes_none(s, param):
                    _check_type(stage_name, param, getattr(s, param), value)
                try:
                    s = replace(s, **{param: value})
                except (TypeError, ValueError) as e:
                    raise ConfigError(f"{stage_name}.{param}={value!r}: {e}") from None
                found = True
            new.append(s)
        lists[attr] = tuple(new)
    if not found:
        raise ConfigError(f"pipeline {p.name!r} has no {stage_name!r} stage; its stages: "
                          f"{', '.join(stage_names(p)) or 'none'}")
    return replace(p, **lists)


def _takes_none(stage: Any, param: str) -> bool:
    """Whether a stage's parameter is declared to take None (``int | None``)."""
    import types
    import typing

    try:
        hint = typing.get_type_hints(type(stage)).get(param)
    except (NameError, TypeError):      # an annotation that cannot be resolved: ask the stage
        return True
    return hint is not None and (typing.get_origin(hint) in (typing.Union, types.UnionType)
                                 and type(None) in typing.get_args(hint))


def _check_type(stage_name: str, param: str, current: Any, value: Any) -> None:
    """A grid value of the kind of the parameter's current one (a number for a number, a
    flag for a flag, a text for a text); a parameter that is None takes anything."""
    kinds = ((bool, (bool,), "true or false"), (int, (int,), "an integer"),
             (float, (int, float), "a number"), (str, (str,), "a text"))
    for kind, ok, words in kinds:
        if isinstance(current, kind):
            if not isinstance(value, ok) or (kind is not bool and isinstance(value, bool)):
                raise ConfigError(f"{stage_name}.{param} takes {words} (now {current!r}), "
                                  f"not {value!r}")
            return


def stage_names(p: Pipeline) -> list[str]:
    """Names of a pipeline's stages (always, stages, enforce, post), each once."""
    return list(dict.fromkeys(s.name for s in (*p.always, *p.stages, *p.enforce, *p.post)))


def _checked(grid: Grid) -> dict[str, list[Any]]:
    """The grid with each name's values read once into a list (an iterator is used up)."""
    if not isinstance(grid, Mapping):
        raise ConfigError(f"a grid is a mapping of name -> list of values, not "
                          f"{type(grid).__name__}")
    out: dict[str, list[Any]] = {}
    for name, values in grid.items():
        if name not in NAMES and name.count(".") != 1:
            raise ConfigError(f"unknown grid name {name!r}; names: {', '.join(NAMES)} or "
                              f"stage.param (e.g. prune.protect_tokens)")
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise ConfigError(f"grid {name!r}: give a list of values, e.g. [{values!r}]")
        out[name] = list(values)
        if not out[name]:
            raise ConfigError(f"grid {name!r} has no values")
    return out


def distinct(configs: Iterable[Config]) -> list[Config]:
    """``configs`` without those that replay what an earlier one does: the same pipeline,
    window and estimator once defaults are filled in (a preset's own threshold, an
    estimator spelled out that is the pipeline's own)."""
    seen: list[tuple[Any, ...]] = []
    out: list[Config] = []
    for c in configs:
        p = c.pipeline()
        if p.target is None:        # no target is the threshold's: the same replay
            p = replace(p, target=p.threshold)
        key = (p, c.window, c.estimator if c.estimator is not None else p.estimator, c.skipped)
        if key not in seen:
            seen.append(key)
            out.append(c)
    return out


def expand(grid: Grid | Sequence[Grid]) -> tuple[list[Config], list[str]]:
    """Every configuration of a grid (or list of grids), in order, and the stage.param names.

    Raises:
        ConfigError: unknown names, an unknown preset, a stage no preset of the grid has,
            or a parameter the stage does not have.

    Example:
        >>> configs, _ = expand({"preset": ["neurolink"], "threshold": [0.6, 0.7]})
        >>> [c.pipeline().threshold for c in configs]
        [0.6, 0.7]
    """
    grids = [_checked(g) for g in ([grid] if isinstance(grid, Mapping) else list(grid))]
    if not grids:
        raise ConfigError("the grid is empty")
    stage_cols: list[str] = []
    for g in grids:
        stage_cols += [n for n in g if n not in NAMES and n not in stage_cols]
    return distinct(c for g in grids for c in _expand_one(g)), stage_cols


def _expand_one(grid: Grid) -> Iterable[Config]:
    presets = list(grid.get("preset", ["neurolink"]))
    pipelines = [resolve_pipeline(p) for p in presets]  # unknown presets fail here
    dotted = [n for n in grid if n not in NAMES]
    for name in dotted:
        st, param = name.split(".")
        having = [p for p in pipelines if st in stage_names(p)]
        if not having:
            known = sorted({s for p in pipelines for s in stage_names(p)})
            raise ConfigError(f"grid {name!r}: no preset of the grid has a {st!r} stage; "
                              f"their stages: {', '.join(known)}")
        for v in grid[name]:  # a bad parameter name fails before any replay
            with_stage_param(having[0], st, param, v)
    names = list(grid)
    value_lists = [list(grid[n]) if n != "preset" else presets for n in names]
    if "preset" not in grid:
        names, value_lists = ["preset", *names], [presets, *value_lists]
    for combo in itertools.product(*value_lists):
        chosen = dict(zip(names, combo))
        p = pipelines[presets.index(chosen["preset"])]
        have = set(stage_names(p))
        params = tuple((n.split(".")[0], n.split(".")[1], chosen[n]) for n in dotted
                       if n.split(".")[0] in have)
        skipped = tuple(n for n in dotted if n.split(".")[0] not in have)
        flds = tuple((n, chosen[n]) for n in PIPELINE_FIELDS
                     if n in chosen and chosen[n] is not None)
        try:
            p = replace(p, **dict(flds))
        except ConfigError as e:
            raise ConfigError(f"grid: {e}") from None
        yield Config(preset=chosen["preset"], fields=flds, params=params,
                     window=_window(chosen.get("window")), estimator=chosen.get("estimator"),
                     skipped=skipped)


def _window(v: Any) -> int | None:
    if v is None or (isinstance(v, int) and not isinstance(v, bool) and v > 0):
        return v
    raise ConfigError(f"grid 'window': {v!r} is not a window in tokens (e.g. 200000)")


def _number(text: str) -> Decimal:
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise ConfigError(f"{text!r} is not a number") from None
    if not d.is_finite():
        raise ConfigError(f"{text!r} is not a finite number: a range needs finite bounds "
                          f"and step")
    return d


def _value(text: str) -> Any:
    t = text.strip()
    low = t.lower()
    if low in ("none", "default"):
        return None
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(t.replace("_", ""))
        except ValueError:
            pass
    return t


def parse_spec(spec: str) -> tuple[str, list[Any]]:
    """``name=values`` from the command line: ``a:b:step`` (b included) or ``v1,v2,...``.

    Numbers become int or float, ``none``/``default`` None, ``true``/``false`` bool;
    ``window`` values also read ``200k``; ``estimator`` values are specs
    (`estimator_specs`: ``max:a,b`` is one). Ranges are computed in decimal, so
    ``0.6:0.95:0.05`` ends at exactly 0.95.

    Example:
        >>> parse_spec("threshold=0.6:0.7:0.05")
        ('threshold', [0.6, 0.65, 0.7])
        >>> parse_spec("preset=neurolink,copilot-fixed")
        ('preset', ['neurolink', 'copilot-fixed'])
        >>> parse_spec("window=100k,200k")
        ('window', [100000, 200000])
        >>> parse_spec("window=100k:200k:50k")
        ('window', [100000, 150000, 200000])
    """
    name, sep, rest = spec.partition("=")
    name = name.strip()
    if not sep or not name or not rest.strip():
        raise ConfigError(f"bad --grid {spec!r}: write name=a:b:step or name=v1,v2 "
                          f"(e.g. threshold=0.6:0.95:0.05)")
    if name not in NAMES and name.count(".") != 1:
        raise ConfigError(f"unknown grid name {name!r}; names: {', '.join(NAMES)} or "
                          f"stage.param (e.g. prune.protect_tokens)")
    if name == "window":
        return name, _windows(rest, spec)
    if name == "estimator":
        return name, [_value(v) for v in estimator_specs(rest)]
    if name != "preset" and _range_without_step(rest):
        raise ConfigError(f"bad range {rest!r} in --grid {spec!r}: write start:stop:step "
                          f"(e.g. threshold=0.6:0.95:0.05) or list the values (0.6,0.8)")
    if name != "preset" and rest.count(":") == 2:
        a, b, step = (_number(x) for x in rest.split(":"))
        if step <= 0 or b < a:
            raise ConfigError(f"bad range {rest!r}: need start <= stop and step > 0")
        n = int((b - a) / step) + 1
        if n > MAX_RANGE_VALUES:
            raise ConfigError(f"range {rest!r} has {n:,} values (at most {MAX_RANGE_VALUES:,})")
        whole = all(x == x.to_integral_value() for x in (a, step))
        return name, [int(a + i * step) if whole else float(a + i * step) for i in range(n)]
    return name, [_value(v) for v in rest.split(",") if v.strip()]


def estimator_specs(text: str) -> list[str]:
    """Estimator specs listed on the command line: separated by ``;``, or by commas where
    a comma does not belong to ``max:<a>,<b>`` (specs have colons: no ranges).

    Example:
        >>> estimator_specs("max:tiktoken:cl100k_base,chars:4,neuron")
        ['max:tiktoken:cl100k_base,chars:4', 'neuron']
        >>> estimator_specs("chars:4; max:chars:3,max:chars:4,neuron")
        ['chars:4', 'max:chars:3,max:chars:4,neuron']
    """
    if ";" in text:
        return [v.strip() for v in text.split(";") if v.strip()]
    pieces = [v.strip() for v in text.split(",") if v.strip()]
    out: list[str] = []
    i = 0
    while i < len(pieces):
        spec, need = pieces[i], pieces[i].lower().startswith("max:")
        i += 1
        while need and i < len(pieces):    # max:<a>,<b>: b is the next piece (maybe a max)
            spec += "," + pieces[i]
            need = pieces[i].lower().startswith("max:")
            i += 1
        out.append(spec)
    return out


def _windows(rest: str, spec: str) -> list[int | None]:
    """The windows of ``window=...``: ``100k:200k:50k`` or ``100k,200k`` (``none``: each
    call's model's)."""
    from ctxlab.cli import parse_window

    def one(text: str) -> int | None:
        if text.strip().lower() in ("none", "default"):
            return None
        try:
            return parse_window(text)
        except ConfigError:
            raise ConfigError(f"bad --grid {spec!r}: {text.strip()!r} is not a window in "
                              f"tokens (e.g. window=100k,200k or window=100k:200k:50k)") from None
    if rest.count(":") == 2:
        a, b, step = (one(x) for x in rest.split(":"))
        if a is None or b is None or step is None or b < a:
            raise ConfigError(f"bad range {rest!r} in --grid {spec!r}: need start <= stop "
                              f"and a step, in tokens")
        if (b - a) // step + 1 > MAX_RANGE_VALUES:
            raise ConfigError(f"range {rest!r} has more than {MAX_RANGE_VALUES:,} values")
        return list(range(a, b + 1, step))
    if ":" in rest:
        raise ConfigError(f"bad range {rest!r} in --grid {spec!r}: write start:stop:step "
                          f"(e.g. window=100k:200k:50k) or list the values (100k,200k)")
    return [one(v) for v in rest.split(",")]


def _range_without_step(text: str) -> bool:
    """``0.6:0.95``, ``0.6..0.9``, ``1:2:3:4``: numbers joined as a range, not start:stop:step."""
    for sep in (":", ".."):
        pieces = [x.strip() for x in text.split(sep)]
        if len(pieces) > 1 and (sep == ".." or len(pieces) != 3) and all(
                re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", x) for x in pieces):
            return True
    return False


def parse_grid(specs: Iterable[str]) -> dict[str, list[Any]]:
    """A grid from ``--grid`` specs; a name given twice is an error."""
    out: dict[str, list[Any]] = {}
    for spec in specs:
        name, values = parse_spec(spec)
        if name in out:
            raise ConfigError(f"grid name {name!r} given twice; put its values in one spec")
        out[name] = values
    return out


__all__ = ["Config", "NAMES", "distinct", "expand", "parse_grid", "parse_spec", "stage_names",
           "with_stage_param"]
