# Sourced by run.sh: running the tests one by one, and the report.

# list_tests GROUP: the generic tests of GROUP, as xfstests names them.
list_tests() {
	awk -v g="$1" '!/^#/ && NF { for (i = 2; i <= NF; i++) if ($i == g) { print "generic/" $1; break } }' \
		"$src/tests/generic/group.list"
}

# run_system SYSTEM TEST...: one ./check over all the tests, watched: a
# test still running after the timeout is killed (check goes on with the
# next) and both mounts taken down: a daemon may be what hung. SYSTEM.tsv has a line "test
# status seconds reason" for each test check reported, read from its
# output as it goes (an interrupted run keeps what it reached).
run_system() {
	set +e # the watch goes on whatever one of its steps says
	local s=$1
	shift
	local dir=$results/$s
	: >"$dir/timeouts"
	(cd "$src" && HOST_OPTIONS=$tmp/$s.config exec ./check -s "$s" --exact-order "$@") >"$dir/check.out" 2>&1 &
	local check=$! cur="" since now
	echo "$check" >>"$tmp/checks"
	while kill -0 "$check" 2>/dev/null; do
		sleep 2
		now=$(date +%s)
		local last
		last=$(tail -n1 "$dir/check.out" 2>/dev/null | grep -oE '^generic/[0-9]+ *$' | tr -d ' ' || true)
		if [ "$last" != "$cur" ]; then
			cur=$last since=$now
		elif [ -n "$cur" ] && [ $((now - since)) -gt "$limit" ]; then
			echo "$cur" >>"$dir/timeouts"
			echo "xfstests: $s: $cur still running after ${limit}s; killed" >&2
			kill_test "$cur"
			take_down "$s" # the next test's _require_test mounts again
			cur="" # reported once
		fi
	done
	wait "$check" || true
	parse_check "$dir" >"$results/$s.tsv"
	take_down "$s"
}

# kill_test TEST: the test's script and every process under it.
kill_test() {
	local p
	for p in /proc/[0-9]*; do
		{ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qE "^(/usr)?/bin/bash (\S*/)?tests/$1 *$" || continue
		kill_tree "${p#/proc/}"
	done
}

# kill_tree PID: PID and its descendants, children first.
kill_tree() {
	local c
	for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do kill_tree "$c"; done
	kill -9 "$1" 2>/dev/null || true
}

# parse_check DIR: SYSTEM.tsv's lines from DIR/check.out. A test's line
# starts with its name; "[not run]" and check's failure notes follow it on
# the same line, and its time (e.g. " 3s ...  2s") ends a pass.
parse_check() {
	awk -v timeouts="$1/timeouts" '
		BEGIN { while ((getline t < timeouts) > 0) killed[t] = 1 }
		/^generic\/[0-9]+/ {
			t = $1; rest = substr($0, length(t) + 1); sub(/^ +/, "", rest)
			if (t in killed) { status = "timeout"; reason = "killed after '"$limit"'s" }
			else if (rest ~ /^\[not run\]/) { status = "notrun"; reason = rest; sub(/^\[not run\] */, "", reason) }
			else if (rest ~ /output mismatch|\[failed|_check_|\[expunged\]/) { status = "fail"; reason = rest }
			else if (rest ~ /[0-9]+s *$/) { status = "pass"; reason = "" }
			else next
			secs = ""; if (match(rest, /[0-9]+s *$/)) secs = substr(rest, RSTART, RLENGTH - 1)
			gsub(/\t/, " ", reason)
			printf "%s\t%s\t%s\t%s\n", t, status, secs + 0, reason
		}' "$1/check.out"
}


# tally SYSTEM: "N tests: P passed, F failed, T timed out, X not run".
tally() {
	awk -F'\t' '{ n++; c[$2]++ } END {
		printf "%d tests: %d passed, %d failed, %d timed out, %d not run\n", n, c["pass"], c["fail"], c["timeout"], c["notrun"] }' \
		"$results/$1.tsv"
}

# report WALL: each system's tally and failures, then what fails only on
# dshfs; false if anything does.
report() {
	local s only=""
	{
		echo "# xfstests $commit, group $group, FSTYP=fuse, ${limit}s a test, ${1}s in all, $(uname -r)"
		for s in "${systems[@]}"; do
			echo "$s: $(tally "$s")"
			awk -F'\t' '$2 == "fail" || $2 == "timeout" { printf "  %s %s: %s\n", $2, $1, $4 }' "$results/$s.tsv"
		done
		if [ -f "$results/dshfs.tsv" ] && [ -f "$results/loopback.tsv" ]; then
			only=$(awk -F'\t' 'NR == FNR { if ($2 == "pass") ok[$1] = 1; next }
				($2 == "fail" || $2 == "timeout") && ok[$1] { print $1 }' "$results/loopback.tsv" "$results/dshfs.tsv")
			echo "failing on dshfs and passing on the loopback: $(echo $only | wc -w)${only:+ (}$(echo $only)${only:+)}"
		fi
	} | tee "$results/summary.txt"
	[ -z "$only" ]
}
