"""`import ctxlab` stays light: no plotting, widgets or tokenizers at import time."""

from __future__ import annotations

import json
import subprocess
import sys

# pyarrow is not listed: pandas 3 itself imports it when installed.
HEAVY = ("matplotlib", "ipywidgets", "tiktoken", "tokenizers", "dask", "IPython",
         "mistral_common", "transformers", "openai", "anthropic", "llama_cpp")


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_ctxlab_loads_no_heavy_module():
    assert _loaded_after("import ctxlab") == []


def test_loading_a_log_loads_no_heavy_module():
    code = ("import ctxlab, ctxlab.datasets, ctxlab.overview, ctxlab.cli\n"
            "t = ctxlab.load(ctxlab.datasets.path('coding_session_b'))")
    assert _loaded_after(code) == []


def test_public_api_is_curated():
    import ctxlab

    assert {"load", "load_dir", "discover", "Transcript", "LoadError"} <= set(ctxlab.__all__)
    for name in ctxlab.__all__:
        assert hasattr(ctxlab, name)


def test_summarizer_registry_loads_no_sdk_until_a_request_is_sent():
    code = ("import ctxlab\nfrom ctxlab.summarizers import names, summarizer\nnames()\n"
            "summarizer('openai', model='m', base_url='http://127.0.0.1:9/v1')\n"
            "summarizer('anthropic', model='m')")
    assert _loaded_after(code) == []
