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
from ctxlab.loaders import Corpus, LoadOptions, discover, load, load_dir
from ctxlab.schema import LoadReport, Transcript, validate

__version__ = "0.1.0"

__all__ = ["ConfigError", "Corpus", "CtxlabError", "LoadError", "LoadOptions", "LoadReport",
           "SchemaError", "Transcript", "__version__", "discover", "load", "load_dir",
           "validate"]
