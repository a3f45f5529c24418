package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/internal/s3test"
	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/versionstore"
)

// remoteMount is a workspace mounted by the real binary with --remote.
type remoteMount struct {
	t                   *testing.T
	backing, mnt, state string
	mounted             string // what mount said
}

// mountRemote mounts a fresh backing directory with --remote url (extra
// flags after), unmounting it at cleanup.
func mountRemote(t *testing.T, url string, extra ...string) *remoteMount {
	t.Helper()
	testfuse.Require(t)
	m := &remoteMount{t: t, backing: t.TempDir(), mnt: filepath.Join(t.TempDir(), "mnt"), state: t.TempDir()}
	t.Cleanup(func() {
		dshfs(t, m.state, "unmount", m.mnt)
		unix.Unmount(m.mnt, mntDetach)
	})
	m.mounted = m.run(0, append([]string{"mount", "--remote", url, m.backing, m.mnt}, extra...)...)
	return m
}

// run runs dshfs with this mount's state, wanting exit code want.
func (m *remoteMount) run(want int, args ...string) string {
	m.t.Helper()
	out, code := dshfs(m.t, m.state, args...)
	if code != want {
		m.t.Fatalf("dshfs %v: exit %d, want %d\n%s", args, code, want, out)
	}
	return out
}

func (m *remoteMount) sh(script string) {
	m.t.Helper()
	cmd := inDir(m.mnt, "sh", "-c", script)
	if out, err := cmd.CombinedOutput(); err != nil {
		m.t.Fatalf("sh -c %q: %v\n%s", script, err, out)
	}
}

// waitLogged waits, up to 10 s, until the workspace's log holds a change
// of path to content, and returns the log (--all --json). A shell's write
// is committed by its release, which the kernel sends after the shell
// exited: the log waits 250 ms for it, and a loaded machine may send it
// later still.
func (m *remoteMount) waitLogged(path, content string) string {
	m.t.Helper()
	want := versionstore.SumString(content)
	var out string
	logged := testfuse.WaitFor(10*time.Second, func() bool {
		out = m.run(0, "log", "--mount", m.mnt, "--all", "--json")
		var changes []versionstore.Change
		if json.Unmarshal([]byte(out), &changes) != nil {
			return false
		}
		for _, c := range changes {
			if c.Path == path && c.Version == want {
				return true
			}
		}
		return false
	})
	if !logged {
		m.t.Fatalf("no change of %s to %q in the log after 10 s:\n%s", path, content, out)
	}
	return out
}

// A session replicated, then its machine gone: log, diff --since, show and
// checkpoints answer from the bucket alone what the daemon answered.
func TestRemoteReviewWithoutTheMachine(t *testing.T) {
	srv := s3test.Start(t, "hist")
	srv.Setenv(t)
	const url = "s3://hist/team/ws1"
	m := mountRemote(t, url)
	m.sh(`printf 'one\ntwo\n' > a.txt && mkdir -p src && printf 'package x\n' > src/x.go && printf 'gone\n' > c.txt`)
	m.run(0, "call", "--mount", m.mnt, "--actor", "agent", "write", `{"file_path":"notes.md","content":"# notes\n"}`)
	m.run(0, "checkpoint", "--mount", m.mnt, "start")
	m.run(0, "call", "--mount", m.mnt, "--actor", "agent", "read", `{"file_path":"a.txt"}`)
	m.run(0, "call", "--mount", m.mnt, "--actor", "agent", "edit", `{"file_path":"a.txt","old_string":"two","new_string":"TWO"}`)
	m.sh(`mv src/x.go src/y.go && rm c.txt && printf 'three\n' >> notes.md`)
	m.waitLogged("notes.md", "# notes\nthree\n")
	local := map[string]string{
		"log":         m.run(0, "log", "--mount", m.mnt, "--all"),
		"diff":        m.run(0, "diff", "--mount", m.mnt, "--since", "start"),
		"checkpoints": m.run(0, "checkpoints", "--mount", m.mnt),
		"history":     m.run(0, "log", "--mount", m.mnt, filepath.Join(m.mnt, "a.txt")),
		"renamed":     m.run(0, "log", "--mount", m.mnt, "--all", filepath.Join(m.mnt, "src/y.go")),
	}
	var changes []versionstore.Change
	if err := json.Unmarshal([]byte(m.run(0, "log", "--mount", m.mnt, "--all", "--json")), &changes); err != nil {
		t.Fatal(err)
	}
	edited := changes[len(changes)-1].Version // the newest change first: find a.txt's edit
	for _, c := range changes {
		if c.Path == "a.txt" && c.Op == "write" {
			edited = c.Version
			break
		}
	}
	local["show"] = m.run(0, "show", "--mount", m.mnt, filepath.Join(m.mnt, "a.txt")+"@"+edited.String()[:10])
	if st := m.run(0, "status"); !strings.Contains(st, "history replicated to "+url+", journal shipped through entry") {
		t.Fatalf("status does not show the replica:\n%s", st)
	}
	m.run(0, "unmount", m.mnt)
	for _, dir := range []string{m.state, m.backing} {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	none := t.TempDir() // no state at all
	remote := map[string]string{}
	for name, args := range map[string][]string{
		"log":         {"log", "--remote", url, "--all"},
		"diff":        {"diff", "--remote", url, "--since", "start"},
		"checkpoints": {"checkpoints", "--remote", url},
		"show":        {"show", "--remote", url, "a.txt@" + edited.String()[:10]},
		"history":     {"log", "--remote", url, "a.txt"},
		"renamed":     {"log", "--remote", url, "--all", "src/y.go"},
	} {
		out, code := dshfs(t, none, args...)
		if code != 0 {
			t.Fatalf("dshfs %v: exit %d\n%s", args, code, out)
		}
		remote[name] = out
	}
	for name := range local {
		if local[name] != remote[name] {
			t.Errorf("%s from the bucket differs from the daemon's:\n--- daemon\n%s\n--- bucket\n%s", name, local[name], remote[name])
		}
	}
	if local["show"] != "one\nTWO\n" || !strings.Contains(local["diff"], "src/y.go") || !strings.Contains(local["history"], `tool, actor "agent"`) {
		t.Fatalf("the session is not what was done:\n%s\n%s", local["show"], local["diff"])
	}
}

// A second daemon on the same prefix is refused before it mounts, and
// says how to take over.
func TestRemoteSecondWriterRefused(t *testing.T) {
	srv := s3test.Start(t, "hist")
	srv.Setenv(t)
	const url = "s3://hist/ws"
	mountRemote(t, url)
	second := &remoteMount{t: t, backing: t.TempDir(), mnt: filepath.Join(t.TempDir(), "mnt"), state: t.TempDir()}
	t.Cleanup(func() { dshfs(t, second.state, "unmount", second.mnt) })
	out := second.run(3, "mount", "--remote", url, second.backing, second.mnt)
	if !strings.Contains(out, "another dshfs replicates to it") || !strings.Contains(out, "--remote-takeover") {
		t.Fatalf("second writer's refusal: %s", out)
	}
	if testfuse.Mounted(second.mnt) {
		t.Fatal("the refused daemon mounted")
	}
}

// kill -9 of the daemon during a burst of writes, then a remount on the same
// state: the bucket ends complete, with no journal entry twice.
func TestRemoteResumesAfterKill(t *testing.T) {
	srv := s3test.Start(t, "hist")
	srv.Setenv(t)
	const url = "s3://hist/ws"
	m := mountRemote(t, url)
	pid := daemonPid(t, m.mounted)
	m.sh(`i=0; while [ $i -lt 300 ]; do printf "file $i\n" > f$i.txt; i=$((i+1)); done`)
	// The burst committed (the mount's batch waits up to a second), its
	// shipping to the bucket perhaps not.
	m.waitLogged("f299.txt", "file 299\n")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testfuse.WaitFor(10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	m.run(0, "mount", "--remote", url, m.backing, m.mnt)
	m.sh(`printf 'after\n' > after.txt`)
	want := m.waitLogged("after.txt", "after\n")
	m.run(0, "unmount", m.mnt)
	got, code := dshfs(t, t.TempDir(), "log", "--remote", url, "--all", "--json")
	if code != 0 {
		t.Fatalf("log --remote: exit %d\n%s", code, got)
	}
	var local, remote []versionstore.Change
	if err := json.Unmarshal([]byte(want), &local); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(got), &remote); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, c := range remote {
		if seen[c.Seq] {
			t.Fatalf("journal entry %d is in the bucket twice", c.Seq)
		}
		seen[c.Seq] = true
	}
	// Versions the kill caught before their commit are not in the journal
	// (the remount finds the files as they are); every entry that is must
	// be in the bucket.
	for _, c := range local {
		if !seen[c.Seq] {
			t.Fatalf("journal entry %d (%s) is not in the bucket", c.Seq, c.Path)
		}
	}
	if len(local) < 100 || len(remote) != len(local) {
		t.Fatalf("%d changes in the bucket, %d in the daemon's log", len(remote), len(local))
	}
}
