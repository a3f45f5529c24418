package daemon

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A daemon holds its backing directory's lock for its life: a second
// daemon of the same user is refused, naming the holder, and is let in once
// the lock is let go.
func TestBackingLock(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	unlock, err := lockBacking(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockBacking(dir, log)
	want := "the backing directory " + dir + " is held by pid " + strconv.Itoa(os.Getpid()) + " ("
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "), which serves no mount of it; stop it first (kill "+strconv.Itoa(os.Getpid())+")") {
		t.Fatalf("a second daemon: %v, want %q…", err, want)
	}
	if err := CheckBacking(dir, ""); err == nil {
		t.Fatal("CheckBacking does not see the lock")
	}
	unlock()
	unlock, err = lockBacking(dir, log)
	if err != nil {
		t.Fatalf("once the lock was let go: %v", err)
	}
	// A holder that lets go within lockGrace (a daemon unmounted from
	// outside, closing its index) does not refuse the directory.
	time.AfterFunc(lockGrace/4, unlock)
	if err := CheckBacking(dir, ""); err != nil {
		t.Fatalf("a lock let go within the grace: %v", err)
	}
	// A daemon whose rival lets go within the grace takes the lock itself.
	unlock, err = lockBacking(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(lockGrace/4, unlock)
	unlock, err = lockBacking(dir, log)
	if err != nil {
		t.Fatalf("a rival that let go within the grace: %v", err)
	}
	defer unlock()
	if _, held := ownLockHolder(dir); !held {
		t.Fatal("the daemon runs without the lock its rival let go")
	}
}

// A lock held by a process of another user is not held against a daemon:
// anyone who may read the directory can take one.
func TestBackingLockOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root: this test must run")
		}
		t.Skip("running a process as nobody needs root")
	}
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil { // this test's own
		t.Fatal(err)
	}
	holder := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "flock", dir, "sleep", "600")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	awaitLockHolder(t, dir, holder.Process.Pid)
	if err := CheckBacking(dir, ""); err != nil {
		t.Fatalf("another user's lock refused the directory: %v", err)
	}
	unlock, err := lockBacking(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("another user's lock refused the daemon: %v", err)
	}
	unlock()
}

// awaitLockHolder waits, at most 10 s, until pid holds a lock on dir.
func awaitLockHolder(t *testing.T, dir string, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, h := range lockHolders(dir) {
			if h.pid == pid {
				if h.uid != 65534 || h.comm != "flock" {
					t.Fatalf("holder %+v, want uid 65534, flock", h)
				}
				return
			}
		}
	}
	t.Fatalf("pid %d took no lock on %s", pid, dir)
}

// A mount run right after an unmount from outside (umount, then mount at
// once, as scripts and xfstests do) was refused while the old daemon, its
// mount gone, was still committing its last versions: it was given 2 s to
// let go of the backing directory. Another dshfs that serves no mount is a
// daemon closing, and is waited for (closingGrace); the holder here is this
// test's own binary, which lets go after lockGrace and a second.
func TestBackingLockWaitsForADaemonClosing(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(t.TempDir(), "ready")
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), "DSHFS_TEST_HOLD_LOCK="+dir, "DSHFS_TEST_HOLD_READY="+ready,
		"DSHFS_TEST_HOLD_FOR="+(lockGrace+time.Second).String())
	holder.Stderr = os.Stderr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder took no lock in 10 s")
		}
	}
	unlock, err := lockBacking(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("a mount after its daemon's unmount: %v", err)
	}
	unlock()
}

// holdLock is the holder's run: the lock on DSHFS_TEST_HOLD_LOCK, held for
// DSHFS_TEST_HOLD_FOR, as a daemon closing holds it.
func holdLock() {
	dir := os.Getenv("DSHFS_TEST_HOLD_LOCK")
	d, err := time.ParseDuration(os.Getenv("DSHFS_TEST_HOLD_FOR"))
	if err != nil {
		panic(err)
	}
	unlock, err := lockBacking(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile(os.Getenv("DSHFS_TEST_HOLD_READY"), nil, 0o600); err != nil {
		panic(err)
	}
	time.Sleep(d)
	unlock()
}

// TestMain runs the package's tests, or, in a lock holder started by
// TestBackingLockWaitsForADaemonClosing, only holds the lock.
func TestMain(m *testing.M) {
	if os.Getenv("DSHFS_TEST_HOLD_LOCK") != "" {
		holdLock()
		os.Exit(0)
	}
	os.Exit(m.Run())
}
