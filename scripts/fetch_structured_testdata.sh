#!/usr/bin/env bash
# Fetches third-party test data for the structured-output tests into an ignored cache
# (never committed): the official JSON-Schema-Test-Suite, as vendored in the `jsonschema`
# source distribution on PyPI (its json/ directory is the suite; MIT licence).
#
# Idempotent: does nothing when the pinned version is already unpacked.
# Usage: scripts/fetch_structured_testdata.sh [CACHE_DIR]   (default build/.cache/structured)
# The tests look in $DEEPINFER_STRUCTURED_DATA, else build/.cache/structured.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${1:-${DEEPINFER_STRUCTURED_DATA:-$root/build/.cache/structured}}
version=4.26.0
sha256=0c26707e2efad8aa1bfc5b7ce170f3fccc2e4918ff85989ba9ffa9facb2be326
dest="$cache/JSON-Schema-Test-Suite"
stamp="$dest/.jsonschema-$version"

if [[ -f "$stamp" ]]; then
  echo "fetch_structured_testdata: JSON-Schema-Test-Suite present in $dest"
  exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# pip resolves the sdist through the package index; --no-deps keeps it to one file.
python3 -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation \
  "jsonschema==$version" -d "$work" 2>/dev/null ||
  python3 -m pip download --quiet --no-deps --no-binary :all: "jsonschema==$version" -d "$work"
archive="$work/jsonschema-$version.tar.gz"
echo "$sha256  $archive" | sha256sum -c --quiet -
tar -xzf "$archive" -C "$work" "jsonschema-$version/json"
rm -rf "$dest"
mv "$work/jsonschema-$version/json" "$dest"
touch "$stamp"
echo "fetch_structured_testdata: JSON-Schema-Test-Suite ($(find "$dest/tests/draft2020-12" -name '*.json' | wc -l) draft 2020-12 files) in $dest"
