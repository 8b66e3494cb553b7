#!/usr/bin/env bash
# The pinned format check CI runs (ctest `clang-format`): every C++ file git tracks or would
# add (untracked, not ignored) formatted by
# clang-format 14 (Debian 12's, what the setup installs) with the repository's .clang-format.
#   scripts/check_format.sh          check (exit 1 and the first diffs when a file differs)
#   scripts/check_format.sh --fix    reformat in place
set -euo pipefail
cd "$(dirname "$0")/.."
FORMAT=${CLANG_FORMAT:-clang-format}
want=14
have=$("$FORMAT" --version 2>/dev/null | sed -n 's/.*clang-format version \([0-9]*\).*/\1/p')
if [ "$have" != "$want" ]; then
  echo "check_format: expected clang-format $want (pinned), found '${have:-none}' ($FORMAT)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.h' | grep -v '^test/golden/')
if [ "${1:-}" = "--fix" ]; then
  "$FORMAT" -i "${files[@]}"
  exit 0
fi
if ! out=$("$FORMAT" --dry-run --Werror "${files[@]}" 2>&1); then
  echo "$out" | head -40
  echo "check_format: $(echo "$out" | grep -c 'error:') lines to reformat in" \
       "$(echo "$out" | grep 'error:' | cut -d: -f1 | sort -u | wc -l) files;" \
       "run scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
