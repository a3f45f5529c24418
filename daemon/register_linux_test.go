package daemon

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/fusefs"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
)

// nobodyDaemonEnv, set, makes TestNobodyDaemonChild a daemon's socket run
// as nobody in the directory it names, and its own client.
const nobodyDaemonEnv = "DSHFS_TEST_NOBODY_DAEMON"

// Over a real socket, a daemon run by a user other than root lets that
// user register its own processes only: another user's (here root's, the
// test's) is refused, whose writes it could otherwise have put under any
// name.
func TestRegisterProcessOnlyThePeersOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the daemon as nobody")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "daemon.test")
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(out, self)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(run, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestNobodyDaemonChild$", "-test.v")
	cmd.Env = append(os.Environ(), nobodyDaemonEnv+"="+run, "ROOT_PID="+strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	b, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "--- PASS: TestNobodyDaemonChild") {
		t.Fatalf("the daemon run as nobody: %v\n%s", err, b)
	}
}

// TestNobodyDaemonChild is the daemon of TestRegisterProcessOnlyThePeersOwn
// (and does nothing run on its own).
func TestNobodyDaemonChild(t *testing.T) {
	run := os.Getenv(nobodyDaemonEnv)
	if run == "" {
		t.Skip("run by TestRegisterProcessOnlyThePeersOwn")
	}
	socket := filepath.Join(run, "dshfs.sock")
	l, err := unixsocket.Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := unixsocket.NewServer(unixsocket.Config{RegisterProcess: registerWith(&fusefs.Actors{})})
	go srv.Serve(l)
	defer l.Close()
	c := unixsocket.NewClient(socket)
	rootPid, _ := strconv.Atoi(os.Getenv("ROOT_PID"))
	if err := c.RegisterProcess(context.Background(), "a", rootPid); err == nil {
		t.Errorf("nobody registered root's process %d", rootPid)
	} else {
		t.Logf("root's process: %v", err)
	}
	if err := c.RegisterProcess(context.Background(), "a", os.Getpid()); err != nil {
		t.Errorf("nobody could not register its own process: %v", err)
	}
}
