#!/usr/bin/env bash
# Runs every fuzz target in the repository, one at a time, for FUZZTIME
# each (default 20s). The targets are found here, not listed: a new
# `func FuzzX(f *testing.F)` in any _test.go file is picked up. A target
# without seeds (no f.Add in it and no testdata/fuzz/FuzzX beside it)
# fails before anything runs: a fuzzer needs a corpus to start from.
# A failing input is left by `go test` under PKG/testdata/fuzz/FuzzX;
# commit it with the fix, as a regression test. `make fuzz` runs this.
#
#   FUZZTIME=5s deploy/fuzz.sh          every target, 5 s each
#   deploy/fuzz.sh FuzzParseHost ...    only the targets named
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-20s}
GO=${GO:-go}

# targets prints "dir name" for every fuzz target, sorted.
targets() {
  git ls-files --cached --others --exclude-standard -- '*_test.go' |
    xargs grep -HoE '^func Fuzz[A-Za-z0-9_]*\(' |
    sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\($#\1 \2#; s#^[^/ ]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\($#. \1#' |
    sort -u
}

# seeded reports whether target name in dir has a seed corpus: an f.Add
# inside the function, or files in testdata/fuzz/name.
seeded() {
  local dir=$1 name=$2
  if [ -n "$(ls -A "$dir/testdata/fuzz/$name" 2>/dev/null)" ]; then
    return 0
  fi
  awk -v fn="func $name(" '
    index($0, fn) == 1 { in_fn = 1; next }
    in_fn && /^}/ { exit }
    in_fn && /\.Add\(/ { found = 1; exit }
    END { exit !found }' "$dir"/*_test.go
}

list=$(targets)
if [ $# -gt 0 ]; then
  want=" $* "
  list=$(echo "$list" | while read -r dir name; do
    case $want in *" $name "*) echo "$dir $name" ;; esac
  done)
fi
if [ -z "$list" ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi

bad=0
while read -r dir name; do
  if ! seeded "$dir" "$name"; then
    echo "fuzz: $dir $name has no seed corpus (f.Add or testdata/fuzz/$name)" >&2
    bad=1
  fi
done <<<"$list"
[ $bad -eq 0 ] || exit 1

failed=()
n=$(echo "$list" | wc -l)
i=0
while read -r dir name; do
  i=$((i + 1))
  echo "fuzz [$i/$n]: $name in ./$dir for $FUZZTIME"
  if ! $GO test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" "./$dir" </dev/null; then
    failed+=("./$dir $name")
  fi
done <<<"$list"

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} of $n targets failed; their inputs are under testdata/fuzz:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzz: all $n targets ran for $FUZZTIME without a failure"
