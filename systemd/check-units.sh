#!/bin/bash
# Static checks of authd's systemd integration files (written for systemd 252).
#
#   usage: systemd/check-units.sh PATH/TO/BUILT/authd
#
# Works on copies in a temporary directory (removed on exit); installs and
# starts nothing.  In the copies every "/usr/bin/" is rewritten (as
# `make install` does with $(PREFIX)) to a temporary bin/ directory whose
# authd is a symlink to the given binary, so that ExecStart= points at a real
# executable, which `systemd-analyze verify` requires.
#
# Checks, each must pass (exit status 1 otherwise):
#   1. systemd-analyze verify of authd.socket + authd.service prints nothing;
#      systemd-analyze --user verify of user/authd.socket + user/authd.service
#      (and of user/authd-desktop.service) prints nothing.
#   2. systemd-analyze security --offline=true --threshold=20 authd.service
#      succeeds and the printed overall exposure is <= 2.0.
#   3. systemd-sysusers --root=TMP accepts authd.sysusers and creates the
#      authd user/group and the authd-admin group.
#   4. systemd-tmpfiles --root=TMP --create accepts authd.tmpfiles and creates
#      /var/lib/authd (0700 authd:authd) and /etc/authd (0755 root:root).
#      Ownership is only checked when run as root (chown needs privilege);
#      otherwise the user/group columns are blanked in the copy.
set -euo pipefail

MAX_EXPOSURE=2.0
THRESHOLD=20   # systemd-analyze's --threshold is in tenths: 20 == 2.0

die() { echo "check-units: FAIL: $*" >&2; exit 1; }

[[ $# -eq 1 ]] || { echo "usage: $0 PATH/TO/authd" >&2; exit 2; }
bin=$1
[[ -f $bin && -x $bin ]] || die "not an executable file: $bin"
bin=$(realpath -- "$bin")

for tool in systemd-analyze systemd-sysusers systemd-tmpfiles; do
    command -v "$tool" >/dev/null || die "$tool not found (Debian: apt-get install systemd)"
done

src=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
for f in authd.service authd.socket authd.sysusers authd.tmpfiles \
         user/authd.service user/authd.socket user/authd-desktop.service; do
    [[ -f $src/$f ]] || die "missing $src/$f"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/authd-check-units.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/system" "$tmp/user" "$tmp/root/etc" \
         "$tmp/home" "$tmp/xdg-runtime"
chmod 0700 "$tmp/xdg-runtime"
ln -s -- "$bin" "$tmp/bin/authd"

for f in authd.service authd.socket; do
    sed "s#/usr/bin/#$tmp/bin/#g" "$src/$f" >"$tmp/system/$f"
    sed "s#/usr/bin/#$tmp/bin/#g" "$src/user/$f" >"$tmp/user/$f"
done
sed "s#/usr/bin/#$tmp/bin/#g" "$src/user/authd-desktop.service" >"$tmp/user/authd-desktop.service"

export SYSTEMD_COLORS=0 SYSTEMD_PAGER=cat SYSTEMD_LOG_COLOR=0
# Our copies first, then the default unit paths (trailing ':'), so that units
# installed on the host cannot shadow the ones under test.
export SYSTEMD_UNIT_PATH="$tmp/system:"
# A private user environment for the --user runs.
user_env=(env "HOME=$tmp/home" "XDG_RUNTIME_DIR=$tmp/xdg-runtime"
          "XDG_CONFIG_HOME=$tmp/home/.config" "XDG_DATA_HOME=$tmp/home/.local/share"
          "XDG_STATE_HOME=$tmp/home/.local/state" "XDG_CACHE_HOME=$tmp/home/.cache"
          "SYSTEMD_UNIT_PATH=$tmp/user:")

cd "$tmp"
rc=0

# 1. verify -------------------------------------------------------------
echo "== systemd-analyze verify authd.socket authd.service"
out=$(systemd-analyze verify "$tmp/system/authd.socket" "$tmp/system/authd.service" 2>&1) || rc=1
if [[ -n $out || $rc -ne 0 ]]; then
    printf '%s\n' "$out"
    die "systemd-analyze verify (system units) complained"
fi
echo "ok: no output"

echo "== systemd-analyze --user verify user/authd.socket user/authd.service user/authd-desktop.service"
out=$("${user_env[@]}" systemd-analyze --user verify \
        "$tmp/user/authd.socket" "$tmp/user/authd.service" "$tmp/user/authd-desktop.service" 2>&1) || rc=1
if [[ -n $out || $rc -ne 0 ]]; then
    printf '%s\n' "$out"
    die "systemd-analyze --user verify (user units) complained"
fi
echo "ok: no output"

# 2. security -----------------------------------------------------------
echo "== systemd-analyze security --offline=true --threshold=$THRESHOLD authd.service"
out=$(systemd-analyze security --no-pager --offline=true --threshold="$THRESHOLD" \
        "$tmp/system/authd.service" 2>&1) || rc=1
# Show the settings that still add exposure (lines with a number at the end).
printf '%s\n' "$out" | grep -E '[[:space:]][0-9]+\.[0-9]+[[:space:]]*$' | grep -v 'Overall exposure' || true
exposure=$(printf '%s\n' "$out" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9][0-9.]*\).*/\1/p' | tail -n1)
[[ -n $exposure ]] || { printf '%s\n' "$out"; die "could not find the overall exposure level"; }
echo "overall exposure: $exposure (limit $MAX_EXPOSURE)"
if [[ $rc -ne 0 ]] || ! awk -v e="$exposure" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(e <= m) }'; then
    die "exposure $exposure is above $MAX_EXPOSURE (or systemd-analyze security failed)"
fi

# Informational only: the user unit cannot use the namespace-based options.
user_exposure=$("${user_env[@]}" systemd-analyze --user security --no-pager --offline=true \
        "$tmp/user/authd.service" 2>&1 |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9][0-9.]*\).*/\1/p' | tail -n1) || true
echo "info: user unit exposure: ${user_exposure:-unknown} (not checked)"

# 3. sysusers -----------------------------------------------------------
echo "== systemd-sysusers --root=TMP authd.sysusers"
systemd-sysusers --root="$tmp/root" "$src/authd.sysusers" 2>&1 || die "systemd-sysusers failed"
grep -q '^authd:x:[0-9]*:[0-9]*:.*:/var/lib/authd:' "$tmp/root/etc/passwd" || die "user authd not created"
grep -q '^authd:x:' "$tmp/root/etc/group" || die "group authd not created"
grep -q '^authd-admin:x:' "$tmp/root/etc/group" || die "group authd-admin not created"
echo "ok"

# 4. tmpfiles -----------------------------------------------------------
echo "== systemd-tmpfiles --root=TMP --create authd.tmpfiles"
if [[ $EUID -eq 0 ]]; then
    tmpfiles_conf=$src/authd.tmpfiles
else
    echo "(not root: ownership not checked)"
    tmpfiles_conf=$tmp/authd.tmpfiles
    awk '/^[[:space:]]*(#|$)/ { print; next } { $4 = "-"; $5 = "-"; print }' \
        "$src/authd.tmpfiles" >"$tmpfiles_conf"
fi
systemd-tmpfiles --root="$tmp/root" --create "$tmpfiles_conf" 2>&1 || die "systemd-tmpfiles failed"
check_dir() { # path mode user group
    local got want
    [[ -d $tmp/root$1 ]] || die "$1 not created"
    if [[ $EUID -eq 0 ]]; then
        got=$(stat -c '%a %u %g' "$tmp/root$1")
        want="$2 $(awk -F: -v u="$3" '$1 == u { print $3 }' "$tmp/root/etc/passwd" /etc/passwd | head -n1)"
        want+=" $(awk -F: -v g="$4" '$1 == g { print $3 }' "$tmp/root/etc/group" /etc/group | head -n1)"
    else
        got=$(stat -c '%a' "$tmp/root$1"); want=$2
    fi
    [[ $got == "$want" ]] || die "$1: got '$got', want '$want' (mode uid gid)"
}
check_dir /var/lib/authd 700 authd authd
check_dir /etc/authd 755 root root
echo "ok"

echo "check-units: all checks passed (exposure $exposure)"
