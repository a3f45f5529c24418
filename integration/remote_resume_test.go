package integration

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/internal/s3test"
	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/versionstore"
)

// snapshot describes every entry below root: type, permission bits and
// content (a symlink's target), by path.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "symlink -> " + target
			return err
		case d.IsDir():
			out[rel] = fmt.Sprintf("dir %o", fi.Mode().Perm())
		default:
			b, err := os.ReadFile(p)
			out[rel] = fmt.Sprintf("file %o %q", fi.Mode().Perm(), b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %s is %q, want %q", what, p, got[p], w)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s is there (%q), and should not be", what, p, g)
		}
	}
}

// resumeMount mounts fresh directories with --from url (extra flags
// after), unmounting at cleanup.
func resumeMount(t *testing.T, url string, extra ...string) *remoteMount {
	t.Helper()
	m := &remoteMount{t: t, backing: t.TempDir(), mnt: filepath.Join(t.TempDir(), "mnt"), state: t.TempDir()}
	t.Cleanup(func() {
		dshfs(t, m.state, "unmount", m.mnt)
		unix.Unmount(m.mnt, mntDetach)
	})
	args := append([]string{"mount", "--from", url, m.backing, m.mnt}, extra...)
	out, code := dshfs(t, m.state, args...)
	if code != 0 {
		logs, _ := filepath.Glob(filepath.Join(m.state, "dshfs", "*", "dshfs.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			out += "\n--- " + l + "\n" + string(b)
		}
		t.Fatalf("dshfs %v: exit %d\n%s", args, code, out)
	}
	m.mounted = out
	return m
}

// A session replicated, then its machine gone: mount --from on fresh
// directories builds the same tree (bytes, modes, directories, symlinks),
// log shows the history, a rewind to the checkpoint made on the first
// machine gives the tree as it was then, and the history goes on in the
// same prefix.
func TestRemoteResumeElsewhere(t *testing.T) {
	srv := s3test.Start(t, "hist")
	srv.Setenv(t)
	const url = "s3://hist/team/ws1"
	m := mountRemote(t, url)
	m.sh(`mkdir -p src docs/empty && printf 'one\ntwo\n' > a.txt && printf 'package x\n' > src/x.go && printf 'gone\n' > c.txt && printf '#!/bin/sh\n' > run.sh && chmod 755 run.sh`)
	m.run(0, "call", "--mount", m.mnt, "--actor", "agent", "write", `{"file_path":"notes.md","content":"# notes\n"}`)
	m.run(0, "checkpoint", "--mount", m.mnt, "start")
	atStart := snapshot(t, m.backing)
	m.run(0, "call", "--mount", m.mnt, "--actor", "agent", "read", `{"file_path":"a.txt"}`)
	m.run(0, "call", "--mount", m.mnt, "--actor", "agent", "edit", `{"file_path":"a.txt","old_string":"two","new_string":"TWO"}`)
	m.sh(`mv src/x.go src/y.go && rm c.txt && printf 'three\n' >> notes.md && ln -s src/y.go link && chmod 600 notes.md && mkdir -p new/dir && chmod 700 new`)
	log := m.run(0, "log", "--mount", m.mnt, "--all")
	m.run(0, "unmount", m.mnt)
	want := snapshot(t, m.backing)
	for _, dir := range []string{m.state, m.backing} {
		must(t, os.RemoveAll(dir))
	}

	r := resumeMount(t, url)
	sameTree(t, "the workspace built from the bucket", snapshot(t, r.backing), want)
	sameTree(t, "the mount over it", snapshot(t, r.mnt), want)
	if got := r.run(0, "log", "--mount", r.mnt, "--all"); got != log {
		t.Errorf("log on the new machine:\n%s\nwant:\n%s", got, log)
	}
	if st := r.run(0, "status"); !strings.Contains(st, "history replicated to "+url) {
		t.Fatalf("the resumed mount does not go on replicating to %s:\n%s", url, st)
	}
	r.run(0, "rewind", "--mount", r.mnt, "start")
	atStart["link"] = want["link"] // a rewind leaves symlinks alone
	for _, p := range []string{"new", "new/dir"} {
		atStart[p] = want[p] // and directories holding no file it removed
	}
	sameTree(t, "the workspace rewound to start", snapshot(t, r.backing), atStart)
	r.sh(`printf 'from the new machine\n' > later.txt`)
	r.run(0, "unmount", r.mnt)
	remoteLog, code := dshfs(t, t.TempDir(), "log", "--remote", url, "--all")
	if code != 0 || !strings.Contains(remoteLog, "later.txt") || !strings.Contains(remoteLog, "src/y.go (from src/x.go)") {
		t.Fatalf("the bucket's history does not go on (exit %d):\n%s", code, remoteLog)
	}

	// A checkpoint the history does not have: refused before anything is made.
	n := &remoteMount{t: t, backing: t.TempDir(), mnt: filepath.Join(t.TempDir(), "mnt"), state: t.TempDir()}
	t.Cleanup(func() { dshfs(t, n.state, "unmount", n.mnt) })
	if out := n.run(3, "mount", "--from", url, "--at", "nosuch", n.backing, n.mnt); !strings.Contains(out, `no checkpoint "nosuch" in that history (it has: `) {
		t.Fatalf("--at nosuch: %s", out)
	}
	if names, _ := os.ReadDir(n.backing); len(names) > 0 {
		t.Fatalf("a refused --at made %v", names)
	}

	// A fork: the checkpoint's workspace, its history going on elsewhere.
	const fork = "s3://hist/team/ws1-fork"
	f := resumeMount(t, url, "--at", "start", "--remote", fork)
	sameTree(t, "the workspace built at start", snapshot(t, f.backing), atStart)
	f.run(0, "unmount", f.mnt)
	forkLog, code := dshfs(t, t.TempDir(), "log", "--remote", fork, "--all")
	if code != 0 || !strings.Contains(forkLog, "later.txt") || forkLog == remoteLog {
		t.Fatalf("the fork's history (exit %d):\n%s", code, forkLog)
	}
	if again, _ := dshfs(t, t.TempDir(), "log", "--remote", url, "--all"); again != remoteLog {
		t.Fatalf("the fork changed the history it came from:\n%s\nwas:\n%s", again, remoteLog)
	}
}

// mount --from refuses a backing directory that holds files, saying why,
// and mounts nothing.
func TestRemoteResumeRefusesNonEmpty(t *testing.T) {
	testfuse.Require(t)
	srv := s3test.Start(t, "hist")
	srv.Setenv(t)
	m := &remoteMount{t: t, backing: t.TempDir(), mnt: filepath.Join(t.TempDir(), "mnt"), state: t.TempDir()}
	t.Cleanup(func() { dshfs(t, m.state, "unmount", m.mnt) })
	must(t, os.WriteFile(filepath.Join(m.backing, "mine.txt"), []byte("x"), 0o644))
	out := m.run(3, "mount", "--from", "s3://hist/ws", m.backing, m.mnt)
	if !strings.Contains(out, "is not empty (it holds mine.txt)") {
		t.Fatalf("refusal: %s", out)
	}
	if testfuse.Mounted(m.mnt) {
		t.Fatal("mounted anyway")
	}
}

// A pack flipped and another deleted in the server's directory: show
// --remote refuses the damaged bytes; the next daemon on the same state
// reads the replica back at start, sends both objects again from its
// store, and show --remote then gives them.
func TestRemoteDamagedObjectSentAgain(t *testing.T) {
	srv := s3test.Start(t, "hist")
	srv.Setenv(t)
	const url = "s3://hist/ws"
	m := mountRemote(t, url)
	m.sh(`printf 'first\n' > a.txt`)
	m.run(0, "unmount", m.mnt)
	m.run(0, "mount", "--remote", url, m.backing, m.mnt)
	m.sh(`printf 'second\n' > b.txt`)
	m.run(0, "unmount", m.mnt)
	versions := map[string]string{}
	var changes []versionstore.Change
	out, _ := dshfs(t, t.TempDir(), "log", "--remote", url, "--all", "--json")
	must(t, json.Unmarshal([]byte(out), &changes))
	for _, c := range changes {
		versions[c.Path] = c.Version.String()
	}
	packs, _ := filepath.Glob(filepath.Join(srv.Dir, "hist", "ws", "packs", "*"))
	if len(packs) != 2 {
		t.Fatalf("packs on the server: %v", packs)
	}
	data, err := os.ReadFile(packs[0])
	must(t, err)
	data[len(data)-3] ^= 0xff
	must(t, os.WriteFile(packs[0], data, 0o644))
	must(t, os.Remove(packs[1]))
	show := func(path string) (string, int) {
		return dshfs(t, t.TempDir(), "show", "--remote", url, path+"@"+versions[path])
	}
	for _, p := range []string{"a.txt", "b.txt"} {
		if out, code := show(p); code == 0 {
			t.Fatalf("show --remote %s of a damaged object: %q", p, out)
		}
	}
	m.run(0, "mount", "--remote", url, m.backing, m.mnt)
	m.run(0, "unmount", m.mnt) // the scrub is done before the drain ends
	for p, want := range map[string]string{"a.txt": "first\n", "b.txt": "second\n"} {
		if out, code := show(p); code != 0 || out != want {
			t.Fatalf("show --remote %s after the scrub: exit %d, %q", p, code, out)
		}
	}
}
