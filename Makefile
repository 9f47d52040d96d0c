# Every target installs what it needs, so each works on a fresh machine.
PY ?= python3
# torch pinned in the same pip call keeps it a CPU build (a plain torch pulls a 5.8 GB CUDA build).
INSTALL = $(PY) -m pip install --quiet --disable-pip-version-check torch==2.13.0 -e ".[all,test]"

.PHONY: install demo test lint bench bench-smoke

install:
	$(INSTALL)

demo: install
	$(PY) -m magnetic_langchain.cli demo

test: install
	$(PY) -m pytest -q

lint: install
	$(PY) -m ruff check .
	$(PY) -m mypy

bench: install
	$(PY) -m benchmarks.run_all
