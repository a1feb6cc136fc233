"""Token counting: estimators by spec string, exact tokenizers offline, context windows.

    >>> from ctxlab.tokens import estimator
    >>> estimator("neurolink:anthropic").count(["hello world"]).tolist()
    [5]

Nothing here imports a tokenizer until an exact estimator is first used.
"""

from __future__ import annotations

from ctxlab.tokens.base import Estimator, text_lengths
from ctxlab.tokens.registry import Family, estimator, families, names, register

__all__ = ["Estimator", "Family", "estimator", "families", "names", "register", "text_lengths"]
