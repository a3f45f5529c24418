#!/usr/bin/env bash
# make xfstests: xfstests' generic quick group (FSTYP=fuse) against a dshfs
# mount and against libfuse's C loopback, passthrough_ll, in the same run.
#
#   run.sh [SYSTEM...]     SYSTEM: dshfs, loopback (default: both)
#
# xfstests is built once (make; Debian: apt-get install -y xfslibs-dev
# uuid-dev libtool-bin automake gcc make pkg-config quota attr acl
# libattr1-dev libacl1-dev libaio-dev libgdbm-dev liburing-dev libcap-dev
# xfsprogs e2fsprogs bc psmisc fio libfuse3-dev gawk) into $XFSTESTS_CACHE
# (default ~/.cache/dshfs/xfstests) from the pinned commit $XFSTESTS_COMMIT
# of $XFSTESTS_GIT: a git directory on this machine or a URL to clone.
# passthrough_ll is built from $LIBFUSE_GIT at the tag of the installed
# libfuse3 (fuse-3.14.0 on Debian 12), against that library.
#
# Each mount gets a helper, /sbin/mount.fuse.dshfs or
# /sbin/mount.fuse.passthrough_ll, installed for the run and removed at its
# end (mount(8) looks for helpers only there); each helper mounts the
# "device" xfstests names, which is a backing directory here:
#   dshfs     dshfs mount --allow-other $XFSTESTS_DSHFS_OPTS DEV MNT
#   loopback  passthrough_ll -o source=DEV,allow_other,default_permissions,xattr MNT
# Users fsgqa, fsgqa2 and 123456-fsgqa (which some tests run as) are made
# for the run if missing, and removed at its end.
#
# Every test runs on its own (./check -s SYSTEM TEST) under a timeout of
# $XFSTESTS_TIMEOUT seconds (default 180): a hung test is killed, its mounts
# are taken down and the run goes on. $XFSTESTS_TESTS="generic/035 ..." runs
# only those; otherwise the generic tests of group $XFSTESTS_GROUP (quick).
# With XFSTESTS_PARALLEL=1 the systems run at the same time, from the same
# built tree: about half the wall time, on a machine with room. With
# XFSTESTS_SHARDS=N (default 1) each system's tests are dealt round-robin to
# N sections (SYSTEM-1 ... SYSTEM-N, each with its own mounts) that run at
# the same time; their results are joined into SYSTEM.tsv.
#
# Results go to $XFSTESTS_RESULTS (default <cache>/results/<time>/): for
# each system SYSTEM.tsv (test, status, seconds, reason; status is pass,
# fail, notrun or timeout) and xfstests' own results directory. Printed: each
# system's tally, then the tests that fail on dshfs and pass on the loopback.
# Exit status 0 if there are none, 1 if there are, 2 on a usage or setup
# error. Root only; ~1–2 hours; not part of `make test`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)

systems=("$@")
[ ${#systems[@]} -gt 0 ] || systems=(dshfs loopback)
for s in "${systems[@]}"; do
	case $s in
	dshfs | loopback) ;;
	*)
		echo "usage: $0 [dshfs|loopback]..." >&2
		exit 2
		;;
	esac
done
if [ "$(id -u)" -ne 0 ]; then
	echo "xfstests: must run as root (the suite mounts, and changes uids and owners)" >&2
	exit 2
fi
for tool in make cc git pkg-config mkfs.ext4 losetup xfs_io setfacl getfattr fusermount3 go timeout; do
	command -v "$tool" >/dev/null || {
		echo "xfstests: $tool not found (see the comment at the top of $0 for Debian's packages)" >&2
		exit 2
	}
done
# xfstests' filters sort with gawk's asort; Debian's default awk is mawk.
awk 'BEGIN { split("b a", x); asort(x) }' 2>/dev/null || {
	echo "xfstests: awk has no asort, which xfstests' filters use (Debian: apt-get install -y gawk)" >&2
	exit 2
}
pkg-config --exists fuse3 || {
	echo "xfstests: libfuse3's headers not found (Debian: apt-get install -y libfuse3-dev)" >&2
	exit 2
}

# The run has a mount namespace of its own: xfstests runs df, which stats
# every mount of the machine, and a FUSE mount whose daemon hangs (another
# program's) would hang the run. Inside, every FUSE mount that is not the
# run's own is detached, from this namespace only. The run's mounts vanish
# with the namespace, whatever happens to it.
if [ -z "${XFSTESTS_NAMESPACE:-}" ]; then
	exec env XFSTESTS_NAMESPACE=1 unshare -m --propagation private bash "$0" "$@"
fi
# mountinfo: the mount point is field 5, the type the field after "-".
awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) ~ /^fuse/) print $5; break } }' /proc/self/mountinfo |
	while read -r m; do
		umount -l --no-canonicalize "$(printf '%b' "$m")" 2>/dev/null || true
	done

cache=${XFSTESTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dshfs/xfstests}
commit=${XFSTESTS_COMMIT:-69cd20bd0498f8d112623be88ce855c063091f19} # v2026.01.27
origin=${XFSTESTS_GIT:-https://github.com/kdave/xfstests}
fuse_origin=${LIBFUSE_GIT:-https://github.com/libfuse/libfuse}
fuse_tag=fuse-$(pkg-config --modversion fuse3)
limit=${XFSTESTS_TIMEOUT:-180}
group=${XFSTESTS_GROUP:-quick}
src=$cache/src

# gitdir ORIGIN NAME: a git directory for ORIGIN, cloned bare if a URL.
gitdir() {
	if [ -d "$1/.git" ]; then
		echo "$1/.git"
	elif [ -d "$1" ]; then
		echo "$1"
	else
		git clone --quiet --bare "$1" "$tmp/$2.git" >&2
		echo "$tmp/$2.git"
	fi
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dshfs-xfstests.XXXXXX")
chmod 0755 "$tmp" # the suite's other users must reach the mounts
made_users=()
made_helpers=()
sections=()
. "$here/cleanup.sh"
. "$here/patch.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- xfstests and passthrough_ll, built once into the cache ---
built="$commit $fuse_tag fuse-patches"
if [ "$(cat "$src/.built" 2>/dev/null)" != "$built" ]; then
	echo "xfstests: building $commit from $origin and passthrough_ll ($fuse_tag) into $src" >&2
	rm -rf "$src" "$cache/src.new"
	mkdir -p "$cache/src.new/libfuse"
	git --git-dir="$(gitdir "$origin" xfstests)" archive "$commit" | tar -x -C "$cache/src.new"
	git --git-dir="$(gitdir "$fuse_origin" libfuse)" archive "$fuse_tag" example/passthrough_ll.c \
		example/passthrough_helpers.h | tar -x -C "$cache/src.new/libfuse"
	(
		cd "$cache/src.new" && make -j"$(nproc)" &&
			cd libfuse/example && cc -Wall -O2 -D_FILE_OFFSET_BITS=64 passthrough_ll.c \
			$(pkg-config fuse3 --cflags --libs) -o passthrough_ll
	) >"$cache/build.log" 2>&1 || {
		echo "xfstests: build failed; see $cache/build.log" >&2
		tail -20 "$cache/build.log" >&2
		exit 2
	}
	patch_xfstests "$cache/src.new"
	echo "$built" >"$cache/src.new/.built"
	mv "$cache/src.new" "$src"
fi

results=${XFSTESTS_RESULTS:-$cache/results/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$results"

# --- the mount helpers, the users, the config ---
mkdir -p "$tmp/bin"
(cd "$repo" && go build -o "$tmp/bin/dshfs" ./cmd/dshfs)
cp "$src/libfuse/example/passthrough_ll" "$tmp/bin/"
install_helper() { # NAME BODY
	local path=/sbin/mount.fuse.$1
	if [ -e "$path" ]; then
		echo "xfstests: $path exists (another run?); remove it first" >&2
		exit 2
	fi
	made_helpers+=("$path")
	# mount -o remount,… is the kernel's (mount -i: no helper); the
	# helper would mount the directory again.
	printf '#!/bin/sh\n# dshfs xfstests run.sh: removed when the run ends\ncase " $* " in *" -o "*remount*) exec mount -i "$@" ;; esac\n%s\n' "$2" >"$path"
	chmod 0755 "$path"
}
for s in "${systems[@]}"; do
	case $s in
	dshfs) install_helper dshfs "XDG_STATE_HOME=\$(dirname \"\$1\")/state exec $tmp/bin/dshfs mount --allow-other ${XFSTESTS_DSHFS_OPTS:-} \"\$1\" \"\$2\" >/dev/null" ;;
	loopback) install_helper passthrough_ll "ulimit -n \$(ulimit -Hn); exec $tmp/bin/passthrough_ll -o fsname=\"\$1\",source=\"\$1\",allow_other,default_permissions,xattr \"\$2\"" ;;
	esac
done
# fsgqa is a member of its group fsgqa, as xfstests' README makes it
# (useradd's user private group): generic/193 counts on it.
getent group fsgqa >/dev/null || { groupadd fsgqa && made_users+=(group:fsgqa); }
for u in fsgqa fsgqa2 123456-fsgqa; do
	if ! id "$u" >/dev/null 2>&1; then
		ugroup=(-N)
		[ "$u" = fsgqa ] && ugroup=(-g fsgqa)
		useradd -M "${ugroup[@]}" -d / -s /bin/sh "$u" # su there prints nothing
		made_users=("$u" "${made_users[@]}") # removed before its group
	fi
done

shards=${XFSTESTS_SHARDS:-1}
sections=()
for s in "${systems[@]}"; do
	if [ "$shards" -gt 1 ]; then
		for i in $(seq "$shards"); do sections+=("$s-$i"); done
	else
		sections+=("$s")
	fi
done
subtype() { if [ "${1%%-*}" = dshfs ]; then echo .dshfs; else echo .passthrough_ll; fi; }
# One config file a section: check mounts the first section of its file's
# test device before it reads -s, which would be another section's.
# Each section's directories live on an ext4 image of its own, loop-mounted
# in this namespace ($XFSTESTS_FS_GIB GiB, default 5): the suite's tests
# that fill their filesystem fill that, not the machine's disk.
gib=${XFSTESTS_FS_GIB:-5}
for s in "${sections[@]}"; do
	d=$tmp/$s
	mkdir -p "$d" "$results/$s"
	truncate -s "${gib}G" "$tmp/$s.img"
	mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 "$tmp/$s.img"
	mount -o loop "$tmp/$s.img" "$d"
	chmod 0755 "$d"
	mkdir -p "$d/test" "$d/test.mnt" "$d/scratch" "$d/scratch.mnt"
	cat >"$tmp/$s.config" <<-EOF
		[$s]
		FSTYP=fuse
		FUSE_SUBTYP=$(subtype "$s")
		TEST_DEV=$d/test
		TEST_DIR=$d/test.mnt
		SCRATCH_DEV=$d/scratch
		SCRATCH_MNT=$d/scratch.mnt
		RESULT_BASE=$results/$s/xfstests
	EOF
done

# --- the tests, each on its own under a timeout ---
. "$here/runtests.sh"
if [ -n "${XFSTESTS_TESTS:-}" ]; then
	read -r -a tests <<<"$XFSTESTS_TESTS"
else
	mapfile -t tests < <(list_tests "$group")
fi
echo "xfstests: ${#tests[@]} tests of $group on ${systems[*]}; per test ${limit}s; results in $results" >&2
start=$(date +%s)
# shard_tests I: the tests of shard I (1-based), every $shards-th.
shard_tests() {
	local i
	for ((i = $1 - 1; i < ${#tests[@]}; i += shards)); do echo "${tests[$i]}"; done
}
# run_isolated SECTION TEST...: run_system in a mount namespace of the
# section's own, which sees the run's mounts and none of the other
# sections'. xfs_io, at its start, stats and statfs's every mount in its
# table whose source is a path (a dshfs or passthrough_ll mount's is its
# backing directory): another section's xfs_io doing so holds this
# section's mount while the daemon answers, and the kernel refuses an
# umount then ("target is busy"). xfstests runs one section a machine.
run_isolated() {
	# shellcheck disable=SC2016 # expanded by the inner shell
	unshare -m --propagation private bash -c '. "$1/cleanup.sh"; . "$1/runtests.sh"; shift; run_system "$@"' _ "$here" "$@"
}
export tmp results src limit # for run_isolated's shell
# run_sections SYSTEM: its sections, at the same time if sharded.
run_sections() {
	local i pids=()
	if [ "$shards" -le 1 ]; then
		run_isolated "$1" "${tests[@]}"
		return
	fi
	for i in $(seq "$shards"); do
		# shellcheck disable=SC2046 # test names have no spaces
		run_isolated "$1-$i" $(shard_tests "$i") &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || true; done
	cat "$results/$1"-*.tsv | sort -t/ -k2,2n >"$results/$1.tsv"
}
if [ "${XFSTESTS_PARALLEL:-0}" = 1 ]; then
	pids=()
	for s in "${systems[@]}"; do
		run_sections "$s" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || true; done
else
	for s in "${systems[@]}"; do run_sections "$s"; done
fi
wall=$(($(date +%s) - start))
report "$wall"
