package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The daemon reports readiness once. It used to report again when the mount
// failed later (an unmount while files were still open), on the descriptor
// it had closed after "ok" — by then reused for a file the mount had open,
// whose bytes were replaced by the error message.
func TestReadyPipeReportsOnce(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fd, err := unix.Dup(int(w.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	ready := &Ready{f: os.NewFile(uintptr(fd), "ready")}
	if !ready.Report(nil) {
		t.Fatal("nobody was told")
	}
	if got, _ := io.ReadAll(r); string(got) != "ok\n" {
		t.Fatalf("parent read %q, want ok", got)
	}
	// The number is free again, and now names a file the mount has open.
	path := filepath.Join(t.TempDir(), "important.txt")
	if err := os.WriteFile(path, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Dup2(int(f.Fd()), fd); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if ready.Report(errors.New("unmount: detached, but still in use")) {
		t.Fatal("a second report claimed a listener")
	}
	if got, _ := os.ReadFile(path); string(got) != "precious\n" {
		t.Fatalf("the file that reused the descriptor now holds %q", got)
	}
}

// childEnv, set, makes TestDetachedChild the detached daemon: it writes
// the Config it was handed to the file the variable names, and reports
// ready.
const childEnv = "DSHFS_TEST_DETACHED_CHILD"

// TestDetachedChild is the child of TestStartCarriesEveryConfigField (and
// does nothing run on its own).
func TestDetachedChild(t *testing.T) {
	out := os.Getenv(childEnv)
	if out == "" {
		t.Skip("run by TestStartCarriesEveryConfigField")
	}
	cfg, ready, err := FromParent()
	if err != nil {
		ready.Report(err)
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte(fmt.Sprintf("%#v", cfg)), 0o600); err != nil {
		ready.Report(err)
		t.Fatal(err)
	}
	ready.Report(nil)
}

// The detached daemon runs with exactly the Config its parent resolved:
// every field, each set to a value of its own, arrives as it was sent. A
// field added to Config that this test cannot fill, or that does not
// arrive, fails it.
func TestStartCarriesEveryConfigField(t *testing.T) {
	state := t.TempDir()
	out := filepath.Join(state, "received")
	t.Setenv(childEnv, out)
	want := everyFieldSet(t)
	want.StateDir = state
	d, err := Start(want, []string{"-test.run=^TestDetachedChild$"})
	if err != nil {
		t.Fatal(err)
	}
	var ws syscall.WaitStatus
	syscall.Wait4(d.Pid, &ws, 0, nil) // the child is this test's, released by Start
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if w := fmt.Sprintf("%#v", want); string(got) != w {
		t.Fatalf("the detached daemon got\n%s\nits parent sent\n%s", got, w)
	}
	if d.Log != filepath.Join(state, LogFileName) {
		t.Errorf("log %s, want it in the state directory", d.Log)
	}
}

// everyFieldSet is a Config whose every field holds a value no other field
// holds, none of them a zero value.
func everyFieldSet(t *testing.T) Config {
	var cfg Config
	v := reflect.ValueOf(&cfg).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		if !f.CanSet() {
			t.Fatalf("Config.%s is unexported: JSON would not carry it to the detached daemon", name)
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString("/" + name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64: // time.Duration too
			f.SetInt(int64(1000 + i))
		default:
			t.Fatalf("Config.%s is a %s: teach everyFieldSet to fill it", name, f.Kind())
		}
		if f.IsZero() {
			t.Fatalf("Config.%s is still its zero value", name)
		}
	}
	return cfg
}

// A daemon that cannot serve says why, and Start returns that; one that
// dies before it says anything is pointed to in its log.
func TestStartReportsTheDaemonsFailure(t *testing.T) {
	state := t.TempDir()
	t.Setenv(childEnv, filepath.Join(state, "no such directory", "received"))
	_, err := Start(Config{StateDir: state}, []string{"-test.run=^TestDetachedChild$"})
	if err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Fatalf("Start: %v, want the child's error", err)
	}
	_, err = Start(Config{StateDir: state}, []string{"-test.run=^$"})
	if want := "the daemon exited before it was ready; see " + filepath.Join(state, LogFileName); err == nil || err.Error() != want {
		t.Fatalf("Start: %v, want %q", err, want)
	}
}

// When the daemon could not unmount cleanly on SIGTERM (a process kept the
// mount busy: it was detached instead), `dshfs unmount` says so rather than
// reporting success, from the note the daemon leaves in its state directory.
func TestUnmountReportsTheDaemonsFailure(t *testing.T) {
	mnt, state := t.TempDir(), t.TempDir()
	fakeDaemon := func() Entry {
		daemon := exec.Command("sleep", "30") // stands in for the daemon: SIGTERM ends it
		if err := daemon.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { daemon.Wait(); close(exited) }()
		t.Cleanup(func() { daemon.Process.Kill(); <-exited })
		return Entry{MountPoint: mnt, Record: Record{MountPoint: mnt,
			Socket: filepath.Join(state, "s.sock"), StateDir: state, Pid: daemon.Process.Pid}}
	}
	msg := "unmount " + mnt + ": no such device"
	if err := os.WriteFile(filepath.Join(state, unmountErrorFile), []byte(msg+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := fakeDaemon()
	err := terminate(e.Record.Pid, e.Record.StateDir, os.Geteuid())
	if err == nil || !strings.Contains(err.Error(), "exited, but: "+msg) {
		t.Fatalf("unmount: %v, want the daemon's failure", err)
	}
	// A mount detached while in use is told apart: unmount --lazy wanted it.
	inUse := "unmount " + mnt + ": detached, but still in use"
	if err := os.WriteFile(filepath.Join(state, unmountErrorFile), []byte(inUse+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if e := fakeDaemon(); !errors.Is(terminate(e.Record.Pid, e.Record.StateDir, os.Geteuid()), ErrDetachedInUse) {
		t.Fatalf("a mount detached while in use is not ErrDetachedInUse")
	}
	// A clean exit leaves no note, and unmount succeeds.
	os.Remove(filepath.Join(state, unmountErrorFile))
	if e := fakeDaemon(); terminate(e.Record.Pid, e.Record.StateDir, os.Geteuid()) != nil {
		t.Fatal("clean unmount failed")
	}
}

// The note of a failed unmount is read from a state directory its daemon's
// record names, which root may take from another user's daemon: a link
// there (to a file only root may read) or a FIFO (which would hang the
// command) is no note, and nor is a file of another user's.
func TestUnmountErrorIsReadOnlyAsTheUsersFile(t *testing.T) {
	state := t.TempDir()
	note := filepath.Join(state, unmountErrorFile)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("root's secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, note); err != nil {
		t.Fatal(err)
	}
	if got := readUnmountError(state, os.Geteuid()); got != "" {
		t.Errorf("a link to another file read as the note: %q", got)
	}
	os.Remove(note)
	if err := syscall.Mkfifo(note, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() { done <- readUnmountError(state, os.Geteuid()) }()
	select {
	case got := <-done:
		if got != "" {
			t.Errorf("a FIFO read as the note: %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO as the note hangs")
	}
	os.Remove(note)
	if err := os.WriteFile(note, []byte("unmount failed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := readUnmountError(state, os.Geteuid()+1); got != "" {
		t.Errorf("another user's file read as the note: %q", got)
	}
	if got := readUnmountError(state, os.Geteuid()); got != "unmount failed" {
		t.Errorf("the user's own note: %q", got)
	}
}
