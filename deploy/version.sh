#!/usr/bin/env bash
# Prints this tree's version, as the Debian package and `froogd version`
# give it: the tag vX.Y.Z when HEAD is one, else BASE~gitYYYYMMDD.COMMIT
# (the commit's date and short hash; `~` sorts before the release BASE, so
# a snapshot upgrades to the release it precedes). BASE is the next
# release, below. Reproducible: it depends on the commit, not on the clock.
set -euo pipefail
BASE=0.1.0
cd "$(dirname "$0")/.."
if tag=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null); then
  echo "${tag#v}"
  exit
fi
date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d)
echo "${BASE}~git${date}.$(git rev-parse --short=7 HEAD)"
