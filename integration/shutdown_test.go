package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/internal/testfuse"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
)

// toolEdits is what one stream of tool edits did: per file, the contents
// acknowledged in order, and the one sent but not acknowledged, if any.
type toolEdits struct {
	acked   map[string][]string
	pending map[string]string
	refused []string // calls the daemon answered with an error
}

// editStream writes a file with the tools and edits it over and over,
// 20 edits a file, until a call is not acknowledged.
func editStream(ctx context.Context, c *unixsocket.Client, mnt string, w int, count *atomic.Int64) toolEdits {
	out := toolEdits{acked: map[string][]string{}, pending: map[string]string{}}
	actor := fmt.Sprintf("agent-%d", w)
	for f := 0; ; f++ {
		path := filepath.Join(mnt, fmt.Sprintf("tool-%d-%d.txt", w, f))
		content := fmt.Sprintf("worker %d file %d\nn=0\n", w, f)
		args, _ := json.Marshal(map[string]string{"file_path": path, "content": content})
		name := "write"
		for n := 0; n <= 20; n++ {
			if n > 0 {
				next := strings.Replace(content, fmt.Sprintf("n=%d\n", n-1), fmt.Sprintf("n=%d\n", n), 1)
				args, _ = json.Marshal(map[string]string{"file_path": path, "old_string": fmt.Sprintf("n=%d", n-1), "new_string": fmt.Sprintf("n=%d", n)})
				name, content = "edit", next
			}
			res, err := c.Call(ctx, name, unixsocket.ToolRequest{Actor: actor, Arguments: args})
			if err != nil || res.IsError {
				out.pending[path] = content
				if err == nil {
					out.refused = append(out.refused, res.Text)
				}
				return out
			}
			out.acked[path] = append(out.acked[path], content)
			count.Add(1)
		}
	}
}

// shellStream writes new files through the mount until a write fails or
// the mount is gone (a file opened on another device than dev: the bare
// mount point); it returns the files written whole and the one it was
// writing.
func shellStream(mnt string, dev uint64, count *atomic.Int64) (acked map[string]string, pending string) {
	acked = map[string]string{}
	for i := 0; ; i++ {
		path := filepath.Join(mnt, fmt.Sprintf("shell-%d.txt", i))
		content := fmt.Sprintf("shell write %d\n%s", i, strings.Repeat("x", i%4096))
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return acked, path
		}
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) != nil || uint64(st.Dev) != dev {
			f.Close()
			os.Remove(path)
			return acked, ""
		}
		_, err = f.WriteString(content)
		if cerr := f.Close(); err != nil || cerr != nil {
			return acked, path
		}
		acked[path] = content
		count.Add(1)
	}
}

// SIGTERM in the middle of a stream of tool edits and shell writes: the
// daemon stops taking calls, lets the calls under way finish, commits the
// mount's last versions and exits without an error. Every edit and write
// that was acknowledged is in the files and in the history after a
// restart, every one that was not is whole or absent, and no call is
// answered with a failure of the daemon going away.
func TestShutdownDrains(t *testing.T) {
	testfuse.Require(t)
	backing, mnt, state := t.TempDir(), filepath.Join(t.TempDir(), "mnt"), t.TempDir()
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dshfs(t, state, "unmount", mnt)
		unix.Unmount(mnt, mntDetach)
	})
	out, code := dshfs(t, state, "mount", backing, mnt)
	if code != 0 {
		t.Fatalf("mount: %s", out)
	}
	pid := daemonPid(t, out)
	socket, _ := filepath.Glob(filepath.Join(state, "dshfs", "*", "dshfs.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := unixsocket.NewClient(socket[0])

	const workers = 4
	var tools, shell atomic.Int64
	edits := make([]toolEdits, workers)
	var shellAcked map[string]string
	var shellPending string
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); edits[w] = editStream(ctx, client, mnt, w, &tools) }()
	}
	wg.Add(1)
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		t.Fatal(err)
	}
	go func() { defer wg.Done(); shellAcked, shellPending = shellStream(mnt, uint64(st.Dev), &shell) }()
	if !testfuse.WaitFor(time.Minute, func() bool { return tools.Load() >= 100 && shell.Load() >= 50 }) {
		t.Fatalf("the streams did not get going: %d tool edits, %d shell writes", tools.Load(), shell.Load())
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !testfuse.WaitFor(time.Minute, func() bool { return syscall.Kill(pid, 0) != nil }) {
		t.Fatal("the daemon did not exit within a minute of SIGTERM")
	}
	wg.Wait()
	t.Logf("%d tool edits and %d shell writes acknowledged", tools.Load(), shell.Load())
	logs, _ := filepath.Glob(filepath.Join(state, "dshfs", "*", "dshfs.log"))
	if b, err := os.ReadFile(logs[0]); err != nil || strings.Contains(string(b), "level=ERROR") {
		t.Errorf("the daemon's log has errors (%v):\n%s", err, b)
	}
	for _, e := range edits {
		for _, text := range e.refused {
			t.Errorf("a tool call was answered with an error as the daemon stopped: %s", text)
		}
	}

	if out, code := dshfs(t, state, "mount", backing, mnt); code != 0 {
		t.Fatalf("mount again: %s", out)
	}
	client = unixsocket.NewClient(socket[0])
	for _, e := range edits {
		for path, acked := range e.acked {
			checkDrained(ctx, t, client, backing, mnt, path, acked, e.pending[path])
		}
	}
	for path, content := range shellAcked {
		checkDrained(ctx, t, client, backing, mnt, path, []string{content}, "")
	}
	if shellPending == "" {
		return
	}
	if b, err := os.ReadFile(filepath.Join(backing, filepath.Base(shellPending))); err == nil && len(b) > 0 && !strings.HasPrefix(string(b), "shell write") {
		t.Errorf("%s, written as the daemon stopped, holds %q", shellPending, b)
	}
}

// checkDrained checks that the file at path holds the last acknowledged
// content, or the pending one whole, and that every acknowledged content
// is in its history, the newest being what the file holds.
func checkDrained(ctx context.Context, t *testing.T, c *unixsocket.Client, backing, mnt, path string, acked []string, pending string) {
	t.Helper()
	rel, _ := filepath.Rel(mnt, path)
	b, err := os.ReadFile(filepath.Join(backing, rel))
	if err != nil {
		t.Errorf("%s: %v", rel, err)
		return
	}
	if got := string(b); got != acked[len(acked)-1] && (pending == "" || got != pending) {
		t.Errorf("%s holds %q; want the last acknowledged %q or the pending %q", rel, got, acked[len(acked)-1], pending)
	}
	h, err := c.History(ctx, "", path)
	if err != nil {
		t.Errorf("history of %s: %v", rel, err)
		return
	}
	in := map[versionstore.Version]bool{}
	for _, e := range h {
		in[e.Version] = true
	}
	for i, content := range acked {
		if !in[versionstore.SumString(content)] {
			t.Errorf("%s: acknowledged version %d of %d (%q) is not in its history", rel, i+1, len(acked), content)
		}
	}
	if len(h) == 0 || h[0].Version != versionstore.Sum(b) {
		t.Errorf("%s: the newest version in its history is not what the file holds", rel)
	}
}
