"""`import ctxlab` stays light: no plotting, widgets or tokenizers at import time."""

from __future__ import annotations

import json
import subprocess
import sys

# pyarrow is not listed: pandas 3 itself imports it when installed.
HEAVY = ("matplotlib", "ipywidgets", "tiktoken", "tokenizers", "dask", "distributed",
         "IPython", "mistral_common", "transformers", "openai", "anthropic", "llama_cpp")


def _loaded_after(code: str) -> list[str]:
    probe = (f"{code}\nimport sys, json\n"
             f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
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


def test_sweeps_and_corpus_datasets_load_no_dask_until_the_dask_engine_runs(tmp_path):
    d = tmp_path / "c"
    # converting counts the texts with the presets' tokenizers (the sessions' facts)
    code = ("import ctxlab.datasets, ctxlab.sweep_dask, ctxlab.cli\n"
            "from ctxlab.loaders.corpus_store import write_corpus\n"
            f"write_corpus(ctxlab.datasets.path('coding_session_b'), {str(d)!r})")
    assert _loaded_after(code) == ["tiktoken"]
    # a sweep that counts with no tokenizer loads none, though the facts hold counts (its
    # measure a heuristic too: the default, an exact tokenizer, loads it)
    code = ("import ctxlab.sweep_dask, ctxlab.cli\n"
            "from ctxlab.sweep import sweep\n"
            f"sweep({str(d)!r}, {{'preset': ['neuron']}}, workers=1, measure='chars:4')")
    assert _loaded_after(code) == []
    code = ("import tempfile, ctxlab.datasets\n"
            "from ctxlab.loaders.corpus_store import write_corpus\n"
            "from ctxlab.sweep import sweep\n"
            "with tempfile.TemporaryDirectory() as tmp:\n"
            "    d = write_corpus(ctxlab.datasets.path('coding_session_b'), tmp + '/c', "
            "facts=False)\n"
            "    sweep(d, {'preset': ['neuron']}, workers=1, measure='chars:4')")
    assert _loaded_after(code) == []
