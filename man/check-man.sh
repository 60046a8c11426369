#!/usr/bin/env bash
# Checks every man page in this directory with groff's warnings enabled.
# Prints groff's complaints and exits non-zero if any page produces output.
set -euo pipefail

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if ! command -v groff >/dev/null 2>&1; then
    echo "check-man.sh: groff is not installed (apt-get install groff-base)" >&2
    exit 2
fi

shopt -s nullglob
pages=("$dir"/*.[1-9])
if ((${#pages[@]} == 0)); then
    echo "check-man.sh: no man pages in $dir" >&2
    exit 1
fi

status=0
for page in "${pages[@]}"; do
    # A control character (a form feed where "\f" was meant, say) is no groff warning.
    if LC_ALL=C grep -qP '[\x00-\x08\x0b-\x1f\x7f]' "$page"; then
        printf '%s: a control character:\n%s\n' "${page##*/}" "$(LC_ALL=C grep -nP '[\x00-\x08\x0b-\x1f\x7f]' "$page" | head -3)" >&2
        status=1
    fi
    output=$(groff -man -Tutf8 -ww -z "$page" 2>&1) || status=1
    if [[ -n $output ]]; then
        printf '%s:\n%s\n' "${page##*/}" "$output" >&2
        status=1
    fi
done
exit "$status"
