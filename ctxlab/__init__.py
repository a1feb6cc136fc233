"""ctxlab: see what context compaction costs and loses, on your own agent logs.

Load a recorded agent transcript into tidy pandas frames::

    >>> import ctxlab
    >>> t = ctxlab.load("datasets/coding_session.jsonl")  # doctest: +SKIP
    >>> t.calls[["call", "input_total"]].head()            # doctest: +SKIP

The package imports only the standard library, numpy and pandas; plotting,
widgets and tokenizers load when first used.
"""

from __future__ import annotations

from ctxlab.errors import ConfigError, CtxlabError, LoadError, SchemaError
from ctxlab.fidelity import fidelity_df
from ctxlab.layers import layers_df
from ctxlab.loaders import Corpus, LoadOptions, discover, load, load_dir
from ctxlab.metrics import needed_recall_df, retention_df
from ctxlab.pipeline import CompactResult, Pipeline, compact
from ctxlab.presets import preset, preset_names
from ctxlab.recommend import recommend
from ctxlab.replay import Replay, replay
from ctxlab.schema import LoadReport, Transcript, validate
from ctxlab.stages import stage
from ctxlab.summarizers import summarizer
from ctxlab.sweep import sweep
from ctxlab.tokens import Estimator, estimator
from ctxlab.tokens.accuracy import (compare_estimators_df, estimator_errors_df,
                                    reported_usage_df, usage_errors_df)
from ctxlab.tokens.calibration import Calibrated, Calibration, calibrate
from ctxlab.tokens.windows import context_window, effective_limit, windows_df
from ctxlab.viz.report import report

__version__ = "0.1.0"

__all__ = ["Calibrated", "Calibration", "CompactResult", "ConfigError", "Corpus", "CtxlabError",
           "Estimator", "LoadError", "LoadOptions", "LoadReport", "Pipeline", "Replay",
           "SchemaError", "Transcript", "__version__", "calibrate", "compact",
           "compare_estimators_df", "context_window", "discover", "effective_limit", "estimator",
           "estimator_errors_df", "fidelity_df", "layers_df", "load", "load_dir",
           "needed_recall_df", "preset", "preset_names", "recommend", "replay", "report",
           "reported_usage_df", "retention_df", "stage", "summarizer", "sweep", "usage_errors_df",
           "validate", "windows_df"]
