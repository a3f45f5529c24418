package integration

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/versionstore"
)

// Every way bytes can change through the mount is versioned: the index
// holds the hash of the new bytes and an edit based on the old read is stale.
func TestEveryWayBytesChange(t *testing.T) {
	for _, tc := range []struct {
		name, change string
		tool         string // a program the change needs
	}{
		{"cp within the mount (copy_file_range)", "cp src.txt f.txt", "cp"},
		{"cat into the file (copy_file_range)", "cat src.txt > f.txt", "cat"},
		{"fallocate punch hole", "fallocate -p -o 0 -l 4096 f.txt", "fallocate"},
		{"fallocate zero range", "fallocate -z -o 4096 -l 10 f.txt", "fallocate"},
		{"truncate", "truncate -s 3 f.txt", "truncate"},
		{"O_APPEND", "printf tail >> f.txt", "printf"},
		{"mmap MAP_SHARED, msync", "python3 -c 'import mmap,os\nf=open(\"f.txt\",\"r+b\")\nm=mmap.mmap(f.fileno(),0)\nm[0:5]=b\"MMAP!\"\nm.flush()\nm.close()\nf.close()'", "python3"},
		{"mmap MAP_SHARED, munmap without msync", "python3 -c 'import mmap\nf=open(\"f.txt\",\"r+b\")\nm=mmap.mmap(f.fileno(),0)\nm[0:5]=b\"UNMAP\"\nm.close()\nf.close()'", "python3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath(tc.tool); err != nil {
				t.Skipf("%s is not installed", tc.tool)
			}
			w := mountWorkspace(t)
			w.sh("python3 -c 'print(\"x\"*8191)' > f.txt && printf 'copied\\n' > src.txt")
			before := w.indexVersion("f.txt")
			w.read("agent", "f.txt")
			w.sh(tc.change)
			b, err := os.ReadFile(w.backing + "/f.txt")
			if err != nil {
				t.Fatal(err)
			}
			if versionstore.Sum(b) == before {
				t.Fatal("the change did not change the bytes; the test proves nothing")
			}
			if got := w.indexVersionBecomes("f.txt", versionstore.Sum(b)); got != versionstore.Sum(b) {
				t.Fatalf("index version %s, bytes hash %s", got.Short(), versionstore.Sum(b).Short())
			}
			wantCode(t, w.edit("agent", "f.txt", "x", "y"), versionstore.CodeStaleVersion)
		})
	}
}

// A hard-linked file edited through one name is stale through the other.
func TestHardLinkStaleThroughOtherName(t *testing.T) {
	w := mountWorkspace(t)
	w.sh("printf 'shared\\n' > a.txt && ln a.txt b.txt")
	w.read("agent", "b.txt")
	w.sh("printf 'changed\\n' >> a.txt")
	wantCode(t, w.edit("agent", "b.txt", "shared", "SHARED"), versionstore.CodeStaleVersion)
	w.read("agent", "b.txt")
	wantCode(t, w.edit("agent", "b.txt", "shared", "SHARED"), "")
}

// A relative path of about 4000 bytes, near PATH_MAX, can be created,
// written, renamed and unlinked through the mount: dshfs never builds the
// absolute backing path.
func TestPathNearPathMax(t *testing.T) {
	w := mountWorkspace(t)
	var parts []string
	for len(strings.Join(parts, "/")) < 3700 {
		parts = append(parts, strings.Repeat(fmt.Sprint(len(parts)%10), 250))
	}
	dir := strings.Join(parts, "/")
	long := dir + "/" + strings.Repeat("f", 3990-len(dir))
	if len(long) < 3980 {
		t.Fatalf("path only %d bytes", len(long))
	}
	w.sh(fmt.Sprintf("mkdir -p %s && printf data > %s && mv %s %s.2 && cat %s.2 && rm %s.2 && rmdir %s",
		dir, long, long, long[:len(long)-2], long[:len(long)-2], long[:len(long)-2], dir))
	if _, err := os.Stat(w.backing + "/" + parts[0]); err != nil {
		t.Fatalf("top directory: %v", err)
	}
}

// A tool write is visible through the mount at once: no stale page, no
// stale size, whatever the kernel had cached.
func TestToolWriteVisibleAtOnce(t *testing.T) {
	w := mountWorkspace(t)
	w.sh("printf 'first version, rather long\\n' > f.txt")
	w.read("agent", "f.txt")
	for i, content := range []string{"short\n", "a much longer second version of the file\n", "", "third\n"} {
		w.content("f.txt") // warm the kernel's caches
		if r := w.write("agent", "f.txt", content); r.IsError {
			t.Fatalf("write %d: %s", i, r.Text)
		}
		if got := w.sh("cat f.txt"); got != content {
			t.Fatalf("write %d: cat shows %q, want %q", i, got, content)
		}
		if got := w.sh("wc -c < f.txt"); strings.TrimSpace(got) != fmt.Sprint(len(content)) {
			t.Fatalf("write %d: size %s, want %d", i, got, len(content))
		}
	}
	// A file the kernel had cached as absent appears too.
	w.sh("test ! -e new.txt")
	if r := w.write("agent", "new.txt", "fresh\n"); r.IsError {
		t.Fatal(r.Text)
	}
	if got := w.sh("cat new.txt"); got != "fresh\n" {
		t.Fatalf("new file: %q", got)
	}
}

// An editor holding the file open with unflushed writes: a tool edit in
// between is refused, never interleaved; once the editor closes, the
// editor's bytes are the version.
func TestEditorOpenRefusesToolEdit(t *testing.T) {
	w := mountWorkspace(t)
	w.sh("printf 'alpha beta\\n' > f.txt")
	w.read("agent", "f.txt")
	f, err := os.OpenFile(w.path("f.txt"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, w.edit("agent", "f.txt", "beta", "BETA"), versionstore.CodeStaleVersion) // open, nothing written yet
	if _, err := f.WriteAt([]byte("ALPHA"), 0); err != nil {
		t.Fatal(err)
	}
	wantCode(t, w.edit("agent", "f.txt", "beta", "BETA"), versionstore.CodeStaleVersion)
	wantCode(t, w.write("agent", "f.txt", "replaced\n"), versionstore.CodeStaleVersion)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := w.content("f.txt"); got != "ALPHA beta\n" {
		t.Fatalf("content %q: the editor's write was lost or interleaved", got)
	}
	w.read("agent", "f.txt")
	wantCode(t, w.edit("agent", "f.txt", "beta", "BETA"), "")
	if got := w.content("f.txt"); got != "ALPHA BETA\n" {
		t.Fatalf("content %q", got)
	}
}

// History of a file changed by a shell names the shell: kind mount, its pid,
// uid and command.
func TestMountHistoryNamesTheWriter(t *testing.T) {
	w := mountWorkspace(t)
	w.sh("printf one > f.txt")
	w.sh("printf two >> f.txt")
	h, err := w.history("f.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 {
		t.Fatalf("history = %+v", h)
	}
	for _, e := range h {
		if e.Writer.Kind != versionstore.WriterMount || e.Writer.Pid == 0 || e.Writer.Comm != "sh" || e.Writer.Uid != uint32(os.Getuid()) {
			t.Fatalf("writer = %+v, want the shell", e.Writer)
		}
	}
	if h[0].Version != versionstore.SumString("onetwo") || h[1].Version != versionstore.SumString("one") {
		t.Fatalf("versions = %s %s", h[0].Version.Short(), h[1].Version.Short())
	}
	w.sh("rm f.txt")
	h, _ = w.history("f.txt")
	if !h[0].Deleted || h[0].Writer.Comm != "rm" {
		t.Fatalf("deletion = %+v", h[0])
	}
}

// The kernel keeps a file's pages between opens only while nothing changed
// the file behind its back: a write straight into the backing directory is
// seen at the next open.
func TestPageCacheDroppedOnOutsideChange(t *testing.T) {
	w := mountWorkspace(t)
	w.sh("printf 'aaaa\\n' > f.txt")
	for range 2 {
		if got := w.content("f.txt"); got != "aaaa\n" {
			t.Fatalf("content %q", got)
		}
	}
	if err := os.WriteFile(w.backing+"/f.txt", []byte("bbbb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := w.content("f.txt"); got != "bbbb\n" {
		t.Fatalf("content %q after an outside write: stale pages", got)
	}
}

// Changes made straight into the backing directory show through the mount
// at once, although the kernel may cache entries and attributes for 30 s:
// dshfs watches the backing tree and drops exactly what changed.
func TestOutsideChangesShowAtOnce(t *testing.T) {
	w := mountWorkspace(t)
	w.sh("mkdir -p d && printf 'one\\n' > d/f.txt && printf gone > d/g.txt")
	for range 2 {
		w.sh("cat d/f.txt; ls d; stat d/g.txt >/dev/null") // cached now
	}
	// inotify does not name the writer: events within 100 ms of the mount's
	// own change to a name are taken for the mount's.
	time.Sleep(200 * time.Millisecond)
	eventually := func(what, script, want string) {
		t.Helper()
		got := ""
		if testfuse.WaitFor(3*time.Second, func() bool { got = w.sh(script); return got == want }) { // far below the 30 s timeout
			return
		}
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
	if err := os.WriteFile(w.backing+"/d/f.txt", []byte("one\ntwo, appended outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually("outside rewrite", "cat d/f.txt", "one\ntwo, appended outside\n")
	if err := os.Remove(w.backing + "/d/g.txt"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.backing+"/d/h.txt", []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually("outside delete and create", "ls d | tr '\\n' ' '", "f.txt h.txt ")
	if err := os.Mkdir(w.backing+"/d/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	eventually("outside mkdir", "ls d | tr '\\n' ' '", "f.txt h.txt sub ")
	if err := os.WriteFile(w.backing+"/d/sub/x", []byte("in a new directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually("a file in a directory made outside", "cat d/sub/x", "in a new directory")
}
