package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// spoofMarker is in every answer of testdata/spoof's socket.
const spoofMarker = "FORGED-BY-SPOOF"

// Another user (nobody) mounts, through fusermount3, FUSE filesystems of
// subtype dshfs (testdata/spoof) whose sources are the victim's mount point
// and a directory of its workspace, and whose roots answer a forged daemon
// record naming the spoofer's socket and a bystander's pid. They are
// mounted before the victim's own mount, so they come first in the mount
// table. Root's commands on its own mount — log, call, mcp, status,
// unmount, with and without --mount — must reach its own daemon, never
// connect to the spoofer's socket nor print what it answers; unmount must
// signal no pid the spoofer names, even when root names the spoofer's mount.
// Both without user_allow_other (root cannot read the spoofer's mounts) and
// with it (their records are readable, as the README's --allow-other advice
// makes them).
func TestDiscoveryIgnoresSpoofedMounts(t *testing.T) {
	for _, allowOther := range []bool{false, true} {
		name := map[bool]string{false: "no_allow_other", true: "allow_other"}[allowOther]
		t.Run(name, func(t *testing.T) {
			testDiscoverySpoofed(t, allowOther)
		})
	}
}

func testDiscoverySpoofed(t *testing.T, allowOther bool) {
	testfuse.Require(t)
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("no fusermount3")
	}
	dir := traversableTempDir(t)
	ns := privateFuseNamespace(t, dir, allowOther)
	ws, mnt, evil := filepath.Join(dir, "ws"), filepath.Join(dir, "mnt"), filepath.Join(dir, "evil")
	state := shortTempDir(t) // the socket's path must fit in 108 bytes
	for _, d := range []string{filepath.Join(ws, "sub"), mnt, filepath.Join(evil, "m1"), filepath.Join(evil, "m2")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	for _, d := range []string{evil, filepath.Join(evil, "m1"), filepath.Join(evil, "m2")} {
		must(t, os.Chown(d, 65534, 65534))
	}
	bystander := startBystander(t)
	sp := startSpoof(t, ns, dir, allowOther, bystander.Process.Pid,
		filepath.Join(evil, "m1")+"="+mnt, filepath.Join(evil, "m2")+"="+filepath.Join(ws, "sub"))

	seen := unmountSpoofed(t, ns, state, filepath.Join(evil, "m1"), sp, bystander)

	run := func(want int, cwd string, args ...string) string {
		t.Helper()
		out, code := ns.dshfs(t, state, cwd, args...)
		if code != want {
			t.Fatalf("dshfs %s (in %s): exit %d, want %d\n%s", strings.Join(args, " "), cwd, code, want, out)
		}
		if strings.Contains(out, spoofMarker) || strings.Contains(out, sp.socket) {
			t.Fatalf("dshfs %s prints the spoofer's data:\n%s", strings.Join(args, " "), out)
		}
		return out
	}
	out := run(0, dir, "mount", "--allow-other", ws, mnt)
	pid := daemonPid(t, out)
	t.Cleanup(func() { ns.dshfs(t, state, dir, "unmount", mnt) })

	run(0, dir, "call", "--mount", mnt, "--actor", "a", "write", `{"file_path":"f.txt","content":"SECRET-1\n"}`)
	run(0, mnt, "call", "--actor", "a", "write", `{"file_path":"sub/g.txt","content":"SECRET-2\n"}`)
	run(0, "/", "call", "--actor", "a", "write", `{"file_path":"`+ws+`/sub/h.txt","content":"SECRET-3\n"}`)
	for f, want := range map[string]string{"f.txt": "SECRET-1\n", "sub/g.txt": "SECRET-2\n", "sub/h.txt": "SECRET-3\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, f)); err != nil || string(b) != want {
			t.Fatalf("%s holds %q, %v; want %q", f, b, err, want)
		}
	}
	if out := run(0, mnt, "call", "--actor", "a", "read", `{"file_path":"f.txt"}`); !strings.Contains(out, "1: SECRET-1") {
		t.Fatalf("read through the mount's daemon:\n%s", out)
	}
	for _, p := range []string{filepath.Join(mnt, "f.txt"), filepath.Join(ws, "sub", "g.txt"), filepath.Join(mnt, "sub", "h.txt")} {
		if out := run(0, "/", "log", p); !strings.Contains(out, `tool, actor "a"`) {
			t.Fatalf("log %s:\n%s", p, out)
		}
	}
	if out := run(0, mnt, "log"); !strings.Contains(out, `tool, actor "a"`) {
		t.Fatalf("log in the mount:\n%s", out)
	}
	out = run(0, "/", "status")
	if !strings.Contains(out, mnt) || !strings.Contains(out, " "+strconv.Itoa(pid)) || strings.Contains(out, " "+strconv.Itoa(bystander.Process.Pid)) {
		t.Fatalf("status does not show the mount's daemon (pid %d), or shows the spoofer's pid %d:\n%s", pid, bystander.Process.Pid, out)
	}
	for _, p := range []string{mnt, filepath.Join(ws, "sub")} {
		if out := run(0, "/", "status", "--json", p); !strings.Contains(out, fmt.Sprintf(`"pid": %d,`, pid)) {
			t.Fatalf("status %s:\n%s", p, out)
		}
	}
	checkSpoofedMCP(t, ns, state, "/", "--mount", mnt)
	checkSpoofedMCP(t, ns, state, mnt)
	run(0, "/", "unmount", mnt)
	if ns.mounted(mnt) {
		t.Fatal("the mount is still there after unmount")
	}
	// Not even its records are read: it is another user's mount.
	if got := sp.log(t)[seen:]; got != "" {
		t.Fatalf("the victim's commands reached the spoofer:\n%s", got)
	}
}

// unmountSpoofed has root name the spoofer's mount to dshfs unmount: the
// record's pid is not the daemon of the socket it names, so nothing is
// signalled. It returns how much the spoofer has logged.
func unmountSpoofed(t *testing.T, ns *fuseNamespace, state, mnt string, sp *spoofer, bystander *exec.Cmd) int {
	t.Helper()
	out, code := ns.dshfs(t, state, "/", "unmount", mnt)
	if code != 5 {
		t.Errorf("dshfs unmount %s (another user's mount, its daemon unverified): exit %d, want 5\n%s", mnt, code, out)
	}
	got := sp.log(t)
	exited := make(chan error, 1)
	go func() { exited <- bystander.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the pid the spoofer named was signalled: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if strings.Contains(got, "signal") {
		t.Fatalf("the spoofer was signalled:\n%s", got)
	}
	return len(got)
}

// fuseNamespace is a private mount namespace, held by a process, in which
// /dev/fuse is open to every user and /etc/fuse.conf says user_allow_other
// or not: fusermount3 runs there as nobody without a change to the
// machine's /dev/fuse or fuse.conf. Every command of a test runs in it.
type fuseNamespace struct{ pid int }

func privateFuseNamespace(t *testing.T, dir string, allowOther bool) *fuseNamespace {
	t.Helper()
	conf := filepath.Join(dir, "fuse.conf")
	body := "# no user_allow_other\n"
	if allowOther {
		body = "user_allow_other\n"
	}
	must(t, os.WriteFile(conf, []byte(body), 0o644))
	dev := filepath.Join(dir, "fuse")
	must(t, unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(10, 229))))
	must(t, os.Chmod(dev, 0o666))
	holder := exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
		`mount --bind "$0" /dev/fuse && mount --bind "$1" /etc/fuse.conf && echo ready && exec sleep 3600`, dev, conf)
	stdout, err := holder.StdoutPipe()
	must(t, err)
	holder.Stderr = os.Stderr
	must(t, holder.Start())
	ns := &fuseNamespace{pid: holder.Process.Pid}
	t.Cleanup(func() {
		ns.detachUnder(dir)
		holder.Process.Kill()
		holder.Wait()
	})
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("private mount namespace: %q %v", line, err)
	}
	return ns
}

// command is name run in the namespace, in dir.
func (ns *fuseNamespace) command(dir, name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--mount", "--target", strconv.Itoa(ns.pid), "--", "sh", "-c",
		`cd "$0" && exec "$@"`, dir, name}, args...)...)
}

// dshfs runs the binary in the namespace as dshfs(t, state, args) does.
func (ns *fuseNamespace) dshfs(t *testing.T, state, dir string, args ...string) (string, int) {
	t.Helper()
	cmd := ns.command(dir, dshfsBin, args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("run dshfs: %v", err)
	return "", -1
}

func (ns *fuseNamespace) mountinfo() string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", ns.pid))
	return string(b)
}

// mounted reports whether dir is a mount point of the namespace.
func (ns *fuseNamespace) mounted(dir string) bool {
	for _, line := range strings.Split(ns.mountinfo(), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// detachUnder detaches every mount of the namespace below dir.
func (ns *fuseNamespace) detachUnder(dir string) {
	var mnts []string
	for _, line := range strings.Split(ns.mountinfo(), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mnts = append(mnts, f[4])
		}
	}
	for i := len(mnts) - 1; i >= 0; i-- {
		ns.command("/", "umount", "-l", mnts[i]).Run()
	}
}

// startBystander starts a process of root's whose pid the spoofer names.
func startBystander(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "3600")
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd
}

// spoofer is testdata/spoof running as nobody.
type spoofer struct {
	socket, logPath string
}

func (s *spoofer) log(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(s.logPath)
	must(t, err)
	return string(b)
}

// startSpoof builds testdata/spoof and runs it as nobody in the namespace,
// mounting each MOUNTPOINT=SOURCE of mounts with a record naming its socket
// and pid.
func startSpoof(t *testing.T, ns *fuseNamespace, dir string, allowOther bool, pid int, mounts ...string) *spoofer {
	t.Helper()
	bin := filepath.Join(dir, "spoof")
	build := exec.Command("go", "build", "-o", bin, "./testdata/spoof")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the spoofer: %v\n%s", err, out)
	}
	must(t, os.Chmod(bin, 0o755))
	evil := filepath.Join(dir, "evil")
	s := &spoofer{socket: filepath.Join(evil, "dshfs.sock"), logPath: filepath.Join(evil, "log")}
	mnt := filepath.Join(dir, "mnt")
	record, _ := json.Marshal(map[string]any{"mount_point": mnt, "backing": mnt, "socket": s.socket,
		"state_dir": evil, "pid": pid, "uid": 0, "version": "spoof"})
	args := []string{"--reuid=65534", "--regid=65534", "--clear-groups", bin, "-socket", s.socket, "-log", s.logPath,
		"-record", string(record), fmt.Sprintf("-allow-other=%v", allowOther)}
	cmd := ns.command(evil, "setpriv", append(args, mounts...)...)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	t.Cleanup(func() {
		for _, m := range mounts {
			mp, _, _ := strings.Cut(m, "=")
			ns.command("/", "umount", "-l", mp).Run()
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	ready := make(chan string, 1)
	go func() { line, _ := bufio.NewReader(stdout).ReadString('\n'); ready <- line }()
	select {
	case line := <-ready:
		if line != "ready\n" {
			t.Fatalf("the spoofer did not mount: %q", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the spoofer did not mount within 30 s")
	}
	return s
}

// shortTempDir is a temporary directory with a short path.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ds")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// checkSpoofedMCP runs dshfs mcp with args in dir and checks that it
// serves the mount's own tools and files.
func checkSpoofedMCP(t *testing.T, ns *fuseNamespace, state, dir string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := ns.command(dir, dshfsBin, append([]string{"mcp", "--actor", "m"}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	client := mcp.NewClient(&mcp.Implementation{Name: "dshfs-test", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("dshfs mcp %v: %v", args, err)
	}
	defer session.Close()
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("dshfs mcp %v: list tools: %v", args, err)
	}
	b, _ := json.Marshal(tools)
	if strings.Contains(string(b), spoofMarker) || len(tools.Tools) < 4 {
		t.Fatalf("dshfs mcp %v lists the spoofer's tools: %s", args, b)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"file_path": "f.txt"}})
	if err != nil {
		t.Fatalf("dshfs mcp %v: read: %v", args, err)
	}
	b, _ = json.Marshal(res)
	if !strings.Contains(string(b), "SECRET-1") || strings.Contains(string(b), spoofMarker) {
		t.Fatalf("dshfs mcp %v: read answered %s", args, b)
	}
}
