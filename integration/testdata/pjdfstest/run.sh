#!/usr/bin/env bash
# make pjdfstest: the pjdfstest POSIX suite (pjd/pjdfstest) inside a dshfs
# mount, or in a plain directory as the anchor.
#
#   run.sh [dshfs|branch|native] [EXTRA MOUNT OPTIONS...]
#
#   dshfs   (default) a fresh backing directory mounted with
#           `dshfs mount --allow-other EXTRA...`; the suite runs inside it
#   branch  the same mount, and the suite runs inside a branch of it
#           (`dshfs branch new pjdfstest`, at MOUNTPOINT@pjdfstest); a
#           branch's mount never has allow_other (docs/branches.md), so
#           compare with `PJDFSTEST_ALLOW_OTHER=no run.sh dshfs`
#   native  no mount: the suite runs in a fresh directory on the same
#           filesystem as the backing directory would be (TMPDIR)
#
# Another mode is one more invocation with other options, e.g.
# `run.sh dshfs --no-passthrough` (as root the mount is in kernel passthrough
# mode unless told not to be) or `run.sh dshfs --io-uring` (the transport is
# printed; the fuse module's enable_uring is left as found).
#
# pjdfstest is built once with autotools (autoconf, automake, libtool, gcc;
# Debian: apt-get install -y autoconf automake libtool) into
# $PJDFSTEST_CACHE (default ~/.cache/dshfs/pjdfstest) from the pinned commit
# $PJDFSTEST_COMMIT of $PJDFSTEST_GIT: a git directory (bare or not) on this
# machine, or a URL to clone (default https://github.com/pjd/pjdfstest).
# It must run as root (the suite switches uids itself), with perl's prove.
#
# The suite runs as `cd DIR && prove -rv <cache>/src/tests`; the whole TAP
# output and a copy of the daemon's log go to $PJDFSTEST_RESULTS (default
# <cache>/results/<mode>-<time>/). Printed: each failing test file with its
# failed assertions ("not ok" lines), then
#   pjdfstest: N files, M tests, F failed files, T failed tests
# Exit status 0 if nothing failed, 1 if something did, 2 on a usage or setup
# error. The mount is always unmounted and the scratch directories removed.
# PJDFSTEST_TESTS="chown/00.t rename" runs only those files or directories
# (relative to tests/). PJDFSTEST_ALLOW_OTHER=no mounts without --allow-other
# (as a branch is: then only root reaches the mount, and the suite's tests
# run as other uids fail there). PJDFSTEST_FS=EXT4 makes the suite take the directory
# for ext4 (the one line this script adds to the suite's tests/conf): it
# skips the rename ctime checks (rename/22.t) on any other type than EXT4,
# UFS and ZFS, a FUSE mount's "FUSE.DSHFS" included. Not part of `make test`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)

mode=${1:-dshfs}
[ $# -eq 0 ] || shift
case $mode in
dshfs | branch | native) ;;
*)
	echo "usage: $0 [dshfs|branch|native] [extra dshfs mount options...]" >&2
	exit 2
	;;
esac
if [ "$mode" = native ] && [ $# -gt 0 ]; then
	echo "pjdfstest: native mode takes no mount options" >&2
	exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "pjdfstest: must run as root (the suite changes uids and owners)" >&2
	exit 2
fi
for tool in prove perl autoreconf make cc git openssl; do
	command -v "$tool" >/dev/null || {
		echo "pjdfstest: $tool not found (Debian: apt-get install -y autoconf automake libtool gcc make perl git openssl)" >&2
		exit 2
	}
done

cache=${PJDFSTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dshfs/pjdfstest}
commit=${PJDFSTEST_COMMIT:-85a8aea9e685999ef0540392fd80535f873d7ff7}
origin=${PJDFSTEST_GIT:-https://github.com/pjd/pjdfstest}
src=$cache/src

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dshfs-pjdfstest.XXXXXX")
chmod 0755 "$tmp" # the suite's other uids only need to reach the test directory
mnt=$tmp/mnt
# `--io-uring` switches the fuse module's enable_uring on for the machine:
# it is put back as found at the end.
uring_param=/sys/module/fuse/parameters/enable_uring
uring_was=$(cat "$uring_param" 2>/dev/null || true)
cleanup() {
	if [ "$mode" = branch ] && mountpoint -q "$mnt@pjdfstest" 2>/dev/null; then
		XDG_STATE_HOME=$tmp/state "$tmp/bin/dshfs" branch drop --force --mount "$mnt" pjdfstest >/dev/null 2>&1 || true
	fi
	if [ "$mode" != native ] && mountpoint -q "$mnt" 2>/dev/null; then
		XDG_STATE_HOME=$tmp/state "$tmp/bin/dshfs" unmount "$mnt" >/dev/null 2>&1 ||
			umount -l "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true
	fi
	if [ -n "${results:-}" ] && [ -d "$tmp/state" ]; then
		find "$tmp/state" -name dshfs.log -exec cp {} "$results/dshfs.log" \; 2>/dev/null || true
	fi
	if [ -n "$uring_was" ] && [ "$(cat "$uring_param")" != "$uring_was" ]; then
		echo "$uring_was" >"$uring_param" || true
	fi
	if mountpoint -q "$mnt" 2>/dev/null || mountpoint -q "$mnt@pjdfstest" 2>/dev/null; then
		echo "pjdfstest: $mnt or $mnt@pjdfstest is still mounted; left $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- pjdfstest, built once into the cache for this commit ---
built="$commit fs-override"
if [ "$(cat "$src/.built" 2>/dev/null)" != "$built" ] || [ ! -x "$src/pjdfstest" ]; then
	echo "pjdfstest: building $commit from $origin into $src" >&2
	rm -rf "$src" "$cache/src.new"
	mkdir -p "$cache/src.new"
	if [ -d "$origin" ]; then
		gitdir=$origin
		[ -d "$origin/.git" ] && gitdir=$origin/.git
	else
		git clone --quiet --bare "$origin" "$tmp/pjdfstest.git"
		gitdir=$tmp/pjdfstest.git
	fi
	git --git-dir="$gitdir" archive "$commit" | tar -x -C "$cache/src.new"
	(cd "$cache/src.new" && autoreconf -ifs && ./configure && make pjdfstest) >"$cache/build.log" 2>&1 || {
		echo "pjdfstest: build failed; see $cache/build.log" >&2
		tail -20 "$cache/build.log" >&2
		exit 2
	}
	# PJDFSTEST_FS, if set, is the file system type the suite assumes: it
	# skips some checks for FUSE types (rename_ctime), see tests/misc.sh.
	printf '%s\n' '' '# added by dshfs run.sh: PJDFSTEST_FS overrides the detected type' \
		'[ -z "${PJDFSTEST_FS:-}" ] || fs=$PJDFSTEST_FS' >>"$cache/src.new/tests/conf"
	echo "$built" >"$cache/src.new/.built"
	mv "$cache/src.new" "$src"
fi

results=${PJDFSTEST_RESULTS:-$cache/results/$mode-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$results"

# --- the directory under test ---
if [ "$mode" != native ]; then
	mkdir -p "$tmp/bin" "$tmp/backing" "$mnt" "$tmp/state"
	(cd "$repo" && go build -o "$tmp/bin/dshfs" ./cmd/dshfs)
	allow=(--allow-other)
	[ "${PJDFSTEST_ALLOW_OTHER:-yes}" != no ] || allow=()
	XDG_STATE_HOME=$tmp/state "$tmp/bin/dshfs" mount "${allow[@]}" "$@" "$tmp/backing" "$mnt" >/dev/null
	dir=$mnt
	desc="dshfs mount${allow[*]:+ ${allow[*]}}${*:+ $*}"
	# what carries the requests, when not /dev/fuse as by default
	transport=$(XDG_STATE_HOME=$tmp/state "$tmp/bin/dshfs" status "$mnt" 2>/dev/null | grep -F ': requests over ' || true)
	[ -z "$transport" ] || desc="$desc (${transport#"$mnt: "})"
	if [ "$mode" = branch ]; then
		# (its note on --allow-other goes to stderr)
		dir=$(XDG_STATE_HOME=$tmp/state "$tmp/bin/dshfs" branch new --mount "$mnt" pjdfstest) &&
			[ "$dir" = "$mnt@pjdfstest" ] && mountpoint -q "$dir" || {
			echo "pjdfstest: dshfs branch new did not mount $mnt@pjdfstest" >&2
			exit 2
		}
		desc="a branch of $desc"
	fi
else
	mkdir -p "$tmp/native"
	dir=$tmp/native
	desc="native $(df -PT "$dir" | awk 'NR == 2 { print $2 }')"
fi
echo "pjdfstest: $desc; TAP output in $results/prove.log" >&2

# --- the suite ---
start=$(date +%s)
rc=0
targets=("$src/tests")
if [ -n "${PJDFSTEST_TESTS:-}" ]; then
	targets=()
	for t in $PJDFSTEST_TESTS; do targets+=("$src/tests/$t"); done
fi
(cd "$dir" && prove -rv "${targets[@]}") >"$results/prove.log" 2>&1 || rc=$?
wall=$(($(date +%s) - start))

# --- the report ---
# From prove -v's output: "<file> .." starts a file's TAP stream, whose
# "not ok" lines without "# TODO" are its failed assertions. prove's "Test
# Summary Report" lists each file it has something to say about: a file
# failed if its wait status is not 0, or it has failed tests, a non-zero exit
# status or parse errors (a bad plan). "TODO passed" alone is no failure (the
# suite expects an assertion to fail on this OS and it passed): those are
# listed apart, as differences from what the suite expects of Linux.
awk -v src="$src/tests/" '
	function flush() {
		if (cur == "") return
		if (bad) { printf "FAILED %s %s\n%s%s", cur, head, body, fails[cur] }
		if (todo != "") { printf "TODO-PASSED %s %s\n", cur, todo }
		cur = ""
	}
	!insum && /^\/.*\.t \.+/ { file = $1; sub(src, "", file) }
	!insum && /^not ok / && !/# TODO/ && file != "" { fails[file] = fails[file] "    " $0 "\n" }
	/^Test Summary Report/ { insum = 1; next }
	insum && /^\/.*\.t +\(Wstat: / {
		flush()
		cur = $1; sub(src, "", cur)
		head = $0; sub(/^[^(]*/, "", head)
		bad = head !~ /Wstat: 0 / || head !~ /Failed: 0\)/
		body = ""; todo = ""; key = ""
		next
	}
	insum && cur != "" && /^  TODO passed:/ { key = "todo"; t = $0; sub(/^  TODO passed: */, "", t); todo = t; next }
	insum && cur != "" && /^  [A-Z]/ { key = "bad"; bad = 1; body = body "  " $0 "\n"; next }
	insum && cur != "" && /^    / {
		if (key == "todo") { t = $0; sub(/^ */, ", ", t); todo = todo t } else body = body "  " $0 "\n"
		next
	}
	insum && /^Files=/ { flush(); insum = 0 }
' "$results/prove.log" >"$results/report.txt"
{ grep -v '^TODO-PASSED ' "$results/report.txt" || true; } | tee "$results/failures.txt"
summary=$(grep -E '^Files=[0-9]+, Tests=[0-9]+' "$results/prove.log" || true)
files=$(sed -nE 's/^Files=([0-9]+), .*/\1/p' <<<"$summary")
tests=$(sed -nE 's/^Files=[0-9]+, Tests=([0-9]+),.*/\1/p' <<<"$summary")
failed_files=$(grep -c '^FAILED ' "$results/failures.txt" || true)
failed_tests=$(sed -nE 's/^FAILED .*Failed: ([0-9]+)\).*/\1/p' "$results/failures.txt" | awk '{ s += $1 } END { print s + 0 }')
todo_files=$(grep -c '^TODO-PASSED ' "$results/report.txt" || true)
todo_tests=$(sed -n 's/^TODO-PASSED [^ ]* //p' "$results/report.txt" | tr ',' '\n' |
	awk -F- 'NF == 2 { s += $2 - $1 + 1; next } /[0-9]/ { s++ } END { print s + 0 }')
if [ -z "$files" ]; then
	echo "pjdfstest: prove printed no summary (exit $rc); see $results/prove.log" >&2
	tail -20 "$results/prove.log" >&2
	exit 2
fi
{
	if [ "$todo_files" -gt 0 ]; then
		grep '^TODO-PASSED ' "$results/report.txt"
		echo "pjdfstest: $todo_tests TODO tests passed in $todo_files file(s) (not failures: tests the suite expects Linux to fail)"
	fi
	echo "# $desc, ${wall}s, pjdfstest $commit${PJDFSTEST_FS:+, PJDFSTEST_FS=$PJDFSTEST_FS}"
	echo "pjdfstest: $files files, $tests tests, $failed_files failed files, $failed_tests failed tests"
} | tee "$results/summary.txt"
[ "$rc" -eq 0 ] && [ "$failed_files" -eq 0 ] || exit 1
