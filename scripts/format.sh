#!/usr/bin/env bash
# format.sh - runs clang-format (the repo's .clang-format) over the files a change touches.
#
#   scripts/format.sh FILE...          format these files in place, whole
#   scripts/format.sh --rev REV        format the lines changed against git revision REV
#                                      (committed, staged and unstaged; tracked files)
#   scripts/format.sh --rev REV --whole   ... the whole of each changed file instead
#   --check (with either form)         change nothing; list what would change, exit 1
#
# The tree was never mass-reformatted, so --rev formats only the changed lines (each
# file's hunks against REV become clang-format --lines ranges): a commit's diff then
# holds its own edits, not a reflow of their neighbours. Only C, header and CUDA files
# (*.c, *.h, *.cu, *.cuh) are touched; others named on the command line are skipped.
# CLANG_FORMAT picks the binary (default clang-format; version 14 or newer).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cf=${CLANG_FORMAT:-clang-format}
rev="" whole=0 check=0
files=()

usage() {
  sed -n '2,13s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit 2
}

while (($#)); do
  case $1 in
  --rev) (($# >= 2)) || usage; rev=$2; shift 2 ;;
  --whole) whole=1; shift ;;
  --check) check=1; shift ;;
  -h | --help) usage ;;
  --) shift; files+=("$@"); break ;;
  -*) echo "format.sh: unknown option $1" >&2; usage ;;
  *) files+=("$1"); shift ;;
  esac
done
[[ -n $rev || ${#files[@]} -gt 0 ]] || usage
[[ -z $rev || ${#files[@]} -eq 0 ]] || { echo "format.sh: give FILEs or --rev, not both" >&2; exit 2; }

command -v "$cf" >/dev/null || { echo "format.sh: $cf not found (set CLANG_FORMAT)" >&2; exit 2; }
major=$("$cf" --version | sed -n 's/.*version \([0-9][0-9]*\).*/\1/p')
((${major:-0} >= 14)) || { echo "format.sh: $cf is version ${major:-?}, need 14+" >&2; exit 2; }

is_source() { [[ $1 == *.c || $1 == *.h || $1 == *.cu || $1 == *.cuh ]]; }

# --lines=A:B arguments for the lines of $1 that differ from $rev (none: nothing new).
changed_lines() {
  git -C "$repo" diff -U0 --no-color "$rev" -- "$1" |
    sed -n 's/^@@ -[0-9,]* +\([0-9]*\)\(,\([0-9]*\)\)\{0,1\} @@.*/\1 \3/p' |
    while read -r start count; do
      count=${count:-1}
      if ((count > 0)); then echo "--lines=$start:$((start + count - 1))"; fi
    done
}

# Runs clang-format on one file (path relative to the repo root) with extra args.
format_one() {
  local f=$1
  shift
  if ((check)); then
    if ! "$cf" --style=file --dry-run --Werror "$@" "$f" 2>/dev/null; then
      echo "$f"
      status=1
    fi
  else
    "$cf" --style=file -i "$@" "$f"
  fi
}

status=0
if [[ -n $rev ]]; then
  cd "$repo" # git diff --name-only names paths from the repo root
  git rev-parse --verify --quiet "$rev^{commit}" >/dev/null ||
    { echo "format.sh: no revision $rev" >&2; exit 2; }
  mapfile -t files < <(git diff --name-only --diff-filter=ACMR "$rev" --)
fi
for f in "${files[@]}"; do
  is_source "$f" || continue
  [[ -f $f ]] || { echo "format.sh: no file $f" >&2; exit 2; }
  if [[ -n $rev && $whole -eq 0 ]]; then
    mapfile -t ranges < <(changed_lines "$f")
    ((${#ranges[@]})) || continue
    format_one "$f" "${ranges[@]}"
  else
    format_one "$f"
  fi
done
exit $status
