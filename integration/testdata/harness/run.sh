#!/usr/bin/env bash
# make harness-check: the real harnesses against a real dshfs mount.
#
# It installs Claude Code, Codex and OpenCode (the versions pinned in
# package-lock.json beside this file) with npm into the user's cache
# directory, builds dshfs, mounts a throwaway workspace and registers dshfs
# with each harness the way docs/harnesses.md says, each harness with its own
# throwaway HOME. Then:
#   - `claude mcp list` must print "✔ Connected", and `claude -p`, its model
#     played by a local stand-in for the Messages API (standin.mjs), calls
#     read, edit, a failing edit and read_image through dshfs; each
#     tool_result Claude Code sent back must be exactly the text dshfs's
#     socket gives for the same call (read_image: plus the PNG as an image
#     block), and no request may offer the built-in Read/Write/Edit;
#   - `codex mcp list` must list dshfs, and `codex exec` (its model the
#     same stand-in, speaking the Responses API) makes the same calls, with
#     the same check of its function_call_output items;
#   - `opencode mcp list` must show dshfs connected, and `opencode run`
#     (the same stand-in, as an Anthropic provider) makes the same calls,
#     with the same check, its built-in read/write/edit denied.
# It needs node and npm (the npm registry), Go, and root or fusermount3; it
# talks to nothing but 127.0.0.1. It unmounts and removes everything it made
# except the npm cache. Not part of `make test`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)

cache=${HARNESS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dshfs/harness}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dshfs-harness.XXXXXX")
mnt=$tmp/mnt
standin_pid=
cleanup() {
	[ -z "$standin_pid" ] || kill "$standin_pid" 2>/dev/null || true
	if mountpoint -q "$mnt" 2>/dev/null; then
		XDG_STATE_HOME=$tmp/state "$tmp/bin/dshfs" unmount "$mnt" >/dev/null 2>&1 || umount -l "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true
	fi
	if mountpoint -q "$mnt" 2>/dev/null; then
		echo "harness-check: $mnt is still mounted; left $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT

results=$tmp/results
: >"$results"
note() { printf '%s\n' "$*" | tee -a "$results"; }
ok() { note "ok - $*"; }
fail() { note "FAIL - $*"; }
check() { # check WHAT ARGS...: check.mjs ARGS, its ok/FAIL lines counted; a crash is a FAIL too
	local what=$1 rc=0
	shift
	node "$here/check.mjs" "$@" >"$tmp/check.out" 2>&1 || rc=$?
	tee -a "$results" <"$tmp/check.out"
	if [ "$rc" -ne 0 ] && ! grep -q '^FAIL - ' "$tmp/check.out"; then fail "$what: check.mjs exited $rc"; fi
}
expect_line() { # expect_line WHAT PATTERN FILE: FILE has a line matching PATTERN
	if grep -qE "$2" "$3"; then ok "$1"; else fail "$1"; sed 's/^/    /' "$3"; fi
}

# --- the harnesses, pinned, installed once into the cache ---
mkdir -p "$cache"
# npm install, not npm ci: the registry lacks some of OpenCode's optional
# per-platform packages, so no lock can list them all and npm ci refuses it.
if ! cmp -s "$here/package-lock.json" "$cache/pinned-lock.json" || [ ! -d "$cache/node_modules" ]; then
	cp "$here/package.json" "$here/package-lock.json" "$cache/"
	# OpenCode's install script runs opencode, which makes its XDG directories:
	# throwaway ones, not the caller's.
	(cd "$cache" && XDG_CONFIG_HOME=$tmp/npm/config XDG_CACHE_HOME=$tmp/npm/cache XDG_DATA_HOME=$tmp/npm/data \
		XDG_STATE_HOME=$tmp/npm/state npm install --no-audit --no-fund --loglevel=error >/dev/null)
	cp "$here/package-lock.json" "$cache/pinned-lock.json"
fi

# --- dshfs, mounted on a throwaway workspace ---
mkdir -p "$tmp/bin" "$tmp/backing" "$mnt" "$tmp/state"
(cd "$repo" && go build -o "$tmp/bin/dshfs" ./cmd/dshfs)
export XDG_STATE_HOME=$tmp/state
export PATH=$tmp/bin:$cache/node_modules/.bin:$PATH
dshfs mount "$tmp/backing" "$mnt" >/dev/null
ws=$mnt/ws mirror=$mnt/mirror
mkdir -p "$ws" "$mirror"
reset_files() {
	for d in "$ws" "$mirror"; do
		printf 'alpha\nbeta\ngamma\n' >"$d/notes.txt"
		node "$here/check.mjs" png "$d/pic.png"
	done
}
plan=$(
	cat <<EOF
[{"name":"mcp__dshfs__read","input":{"file_path":"$ws/notes.txt"}},
 {"name":"mcp__dshfs__edit","input":{"file_path":"$ws/notes.txt","old_string":"beta","new_string":"BETA"}},
 {"name":"mcp__dshfs__edit","input":{"file_path":"$ws/notes.txt","old_string":"not in the file","new_string":"x"}},
 {"name":"mcp__dshfs__read_image","input":{"file_path":"$ws/pic.png"}}]
EOF
)
reset_files
node "$here/check.mjs" expect "$plan" "$ws" "$mirror" "$tmp/expect"

# --- the stand-in model ---
STANDIN_LOG=$tmp/standin.log STANDIN_PORT_FILE=$tmp/standin.port STANDIN_PLAN=$plan \
	node "$here/standin.mjs" 2>"$tmp/standin.err" &
standin_pid=$!
for _ in $(seq 50); do [ -s "$tmp/standin.port" ] && break; sleep 0.1; done
base=http://127.0.0.1:$(cat "$tmp/standin.port")

# as_user NAME CMD...: CMD in NAME's throwaway HOME, with no other environment
# than this (so nothing of the caller's harness configuration leaks in).
as_user() {
	local home=$tmp/home-$1
	shift
	mkdir -p "$home/proj"
	(cd "$home/proj" && env -i PATH="$PATH" HOME="$home" LANG=C.UTF-8 TERM=dumb \
		XDG_CONFIG_HOME="$home/.config" XDG_CACHE_HOME="$home/.cache" XDG_DATA_HOME="$home/.local/share" \
		XDG_STATE_HOME="$XDG_STATE_HOME" "$@")
}
version() { note "# $(as_user "$1" "$1" --version 2>/dev/null | head -1)"; }

# --- Claude Code ---
version claude
as_user claude claude mcp add dshfs -- dshfs mcp --mount "$mnt" >/dev/null
as_user claude timeout 120 claude mcp list >"$tmp/claude-list" 2>&1 || true
sed 's/^/    /' "$tmp/claude-list"
expect_line "claude mcp list: dshfs ✔ Connected" '^dshfs: .* - ✔ Connected' "$tmp/claude-list"
claude_p() { # claude_p ARGS...: one non-interactive session against the stand-in
	reset_files
	: >"$tmp/standin.log"
	as_user claude env ANTHROPIC_BASE_URL="$base" ANTHROPIC_API_KEY=sk-standin \
		CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
		timeout 180 claude -p "Read notes.txt, change beta to BETA, then look at pic.png." \
		--output-format stream-json --verbose "$@" >"$tmp/claude.out" 2>"$tmp/claude.err"
}
if claude_p --allowedTools mcp__dshfs --disallowedTools Read,Write,Edit; then
	ok "claude -p --allowedTools mcp__dshfs --disallowedTools Read,Write,Edit ran"
	check claude claude "$tmp/standin.log" "$tmp/expect" "$ws" "$mirror"
else
	fail "claude -p ran"
	sed 's/^/    /' "$tmp/claude.err" | tail -20
fi
# For contrast, not a check: what the model gets from --structured-content.
if claude_p --allowedTools mcp__dshfs --strict-mcp-config \
	--mcp-config "{\"mcpServers\":{\"dshfs\":{\"command\":\"dshfs\",\"args\":[\"mcp\",\"--mount\",\"$mnt\",\"--structured-content\"]}}}"; then
	node "$here/check.mjs" structured "$tmp/standin.log" | head -2
fi

# --- Codex ---
version codex
mkdir -p "$tmp/home-codex/.codex"
cat >"$tmp/home-codex/.codex/config.toml" <<EOF
model = "gpt-5"
model_provider = "standin"

[model_providers.standin]
name = "stand-in"
base_url = "$base/v1"
wire_api = "responses"
env_key = "STANDIN_KEY"

[mcp_servers.dshfs]
command = "dshfs"
args = ["mcp", "--mount", "$mnt"]
# codex exec approves nothing: let dshfs's tools run (a stale write or edit
# is refused by dshfs itself).
default_tools_approval_mode = "approve"
EOF
as_user codex timeout 60 codex mcp list >"$tmp/codex-list" 2>"$tmp/codex-list.err" || true
sed 's/^/    /' "$tmp/codex-list"
expect_line "codex mcp list: dshfs enabled" '^dshfs +dshfs +mcp --mount .* enabled' "$tmp/codex-list"
reset_files
: >"$tmp/standin.log"
if as_user codex env STANDIN_KEY=standin timeout 180 codex exec --skip-git-repo-check --json \
	"Read notes.txt, change beta to BETA, then look at pic.png." </dev/null >"$tmp/codex.out" 2>"$tmp/codex.err"; then
	ok "codex exec ran"
	check codex codex "$tmp/standin.log" "$tmp/expect" "$ws" "$mirror"
else
	fail "codex exec ran"
	grep -v '^WARNING' "$tmp/codex.err" | sed 's/^/    /' | tail -20
fi

# --- OpenCode ---
version opencode
mkdir -p "$tmp/home-opencode/proj"
cat >"$tmp/home-opencode/proj/opencode.json" <<EOF
{
  "mcp": { "dshfs": { "type": "local", "command": ["dshfs", "mcp", "--mount", "$mnt"] } },
  "permission": { "read": "deny", "edit": "deny" },
  "model": "anthropic/claude-sonnet-4-5",
  "provider": { "anthropic": { "options": { "baseURL": "$base/v1", "apiKey": "sk-standin" } } }
}
EOF
as_user opencode timeout 120 opencode mcp list 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >"$tmp/opencode-list" || true
sed 's/^/    /' "$tmp/opencode-list"
expect_line "opencode mcp list: dshfs connected" '✓ dshfs +connected' "$tmp/opencode-list"
reset_files
: >"$tmp/standin.log"
if as_user opencode timeout 180 opencode run --format json \
	"Read notes.txt, change beta to BETA, then look at pic.png." </dev/null >"$tmp/opencode.out" 2>"$tmp/opencode.err"; then
	ok "opencode run ran"
	check opencode opencode "$tmp/standin.log" "$tmp/expect" "$ws" "$mirror"
else
	fail "opencode run ran"
	sed 's/^/    /' "$tmp/opencode.err" | tail -20
fi

# --- tally ---
passed=$(grep -c '^ok - ' "$results" || true)
failed=$(grep -c '^FAIL - ' "$results" || true)
echo "harness-check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
