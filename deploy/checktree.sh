#!/usr/bin/env bash
# Fails when git tracks a build output: a file over 1 MiB, or an
# executable binary (an ELF, Mach-O or PE file, whatever its name or mode).
# Scripts are executable text and pass. `make lint` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue # deleted in the work tree
  size=$(stat -c %s "$f")
  if [ "$size" -gt 1048576 ]; then
    echo "checktree: $f is tracked and is $((size / 1024)) KiB (over 1 MiB): build outputs and data belong in .gitignore" >&2
    bad=1
    continue
  fi
  magic=$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')
  case $magic in
  7f454c46 | cffaedfe | cefaedfe | feedfacf | feedface | cafebabe | 4d5a*)
    echo "checktree: $f is tracked and is an executable binary: build outputs belong in .gitignore" >&2
    bad=1
    ;;
  esac
done < <(git ls-files -z)
exit $bad
