# Sourced by run.sh: taking mounts down, and leaving the machine as it was.

# our_pids NAME BACKING...: the processes of our own copy of NAME that hold
# one of the BACKING directories open (the daemons serving them; a
# detached dshfs has no paths in its command line).
our_pids() {
	local name=$1 exe b
	shift
	find /proc -mindepth 2 -maxdepth 2 -name exe -lname "$tmp/bin/$name" 2>/dev/null |
		while read -r exe; do
			for b in "$@"; do
				if [ -n "$(find "${exe%/exe}/fd" -lname "$b" -print -quit 2>/dev/null)" ]; then
					basename "${exe%/exe}"
					break
				fi
			done
		done
}

# is_mounted DIR: whether something is mounted on DIR (a path without
# spaces), from the mount table alone.
is_mounted() {
	awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# take_down SECTION: unmount its test and scratch mounts and wait (10 s at
# most) for their daemons to exit, killing them after that. A test killed
# by its timeout leaves both mounted, and may leave its daemon hung.
take_down() {
	local d=$tmp/$1 name=passthrough_ll m pids i
	[ "${1%%-*}" = dshfs ] && name=dshfs
	[ -d "$d" ] || return 0
	# Nothing here stats the mount points: a hung daemon would hang it.
	for m in "$d/test.mnt" "$d/scratch.mnt"; do
		is_mounted "$m" || continue
		umount --no-canonicalize "$m" 2>/dev/null || umount -l --no-canonicalize "$m" 2>/dev/null || true
	done
	for i in $(seq 20); do
		pids=$(our_pids "$name" "$d/test" "$d/scratch")
		[ -n "$pids" ] || return 0
		sleep 0.5
	done
	echo "xfstests: $name on $d still running 10 s after its unmount; killed" >&2
	# shellcheck disable=SC2086 # a list of pids
	kill -9 $pids 2>/dev/null || true
}

# cleanup: the mounts, any loop device on a file of ours, the mount helpers
# and users made for the run; the scratch directory unless a mount is left.
cleanup() {
	local s h u
	set +e # every step is tried, whatever the one before said
	for j in $(jobs -p) $(cat "$tmp/checks" 2>/dev/null); do # a run cut short: its watches, checks and tests
		kill_tree "$j"
	done
	for s in "${sections[@]}"; do
		take_down "$s"
		umount "$tmp/$s" 2>/dev/null
	done
	losetup -n -O NAME,BACK-FILE 2>/dev/null | awk -v t="$tmp/" 'index($2, t) == 1 { print $1 }' |
		while read -r dev; do losetup -d "$dev" 2>/dev/null || true; done
	for h in "${made_helpers[@]}"; do rm -f "$h"; done
	for u in "${made_users[@]}"; do
		case $u in
		group:*) groupdel "${u#group:}" 2>/dev/null || true ;;
		*) userdel "$u" 2>/dev/null || true ;;
		esac
	done
	if findmnt -rn -o TARGET | grep -qF "$tmp/"; then
		echo "xfstests: a mount under $tmp is left; left $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
