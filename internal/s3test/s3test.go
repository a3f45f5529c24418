// Package s3test runs a real S3-compatible server for tests: versitygw
// (Apache-2.0) serving a directory, built once from the Go module proxy at
// a pinned version into the user's cache, outside the repository and its
// module. It is for tests only.
package s3test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Module and Version pin the server.
const (
	Module  = "github.com/versity/versitygw/cmd/versitygw"
	Version = "v1.8.0"
)

// The server's root user; the tests' requests sign with it.
const (
	AccessKey = "dshfs-test"
	SecretKey = "dshfs-test-secret"
)

// Binary is the path of the built server: $DSHFS_VERSITYGW if set, else
// versitygw in the user's cache, built there first if missing (under a
// lock: packages' tests run at once).
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("DSHFS_VERSITYGW"); p != "" {
		return p
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("find the cache for versitygw: %v", err)
	}
	dir := filepath.Join(cache, "dshfs", "versitygw-"+Version)
	bin := filepath.Join(dir, "versitygw")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("building %s@%s into %s (once)", Module, Version, dir)
	cmd := exec.Command("go", "install", Module+"@"+Version)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build versitygw: %v\n%s", err, out)
	}
	return bin
}

// Server is a running versitygw.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Dir      string // the directory it serves: one subdirectory per bucket
	addr     string
	bin      string
	cmd      *exec.Cmd
	t        testing.TB
}

// Start runs a server on a free loopback port over a new directory, with
// bucket made, and stops it in t.Cleanup.
func Start(t testing.TB, bucket string) *Server {
	t.Helper()
	s := &Server{Dir: t.TempDir(), bin: Binary(t), t: t}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	l.Close()
	s.Endpoint = "http://" + s.addr
	if err := os.Mkdir(filepath.Join(s.Dir, bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// Restart starts the server again after Stop, on the same port and
// directory, and waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "--port", s.addr, "--access", AccessKey, "--secret", SecretKey, "--quiet", "posix", s.Dir)
	s.cmd.Stdout, s.cmd.Stderr = os.Stderr, os.Stderr
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start versitygw: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.Stop()
			s.t.Fatalf("versitygw did not listen on %s within 30 s", s.addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (as a crash would) and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Env is the environment that points the AWS configuration chain at the
// server and at nothing else: no shared files, no instance metadata.
func (s *Server) Env() []string {
	none := filepath.Join(s.Dir, "no-aws-config")
	return []string{
		"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_REGION=us-east-1", "AWS_ENDPOINT_URL_S3=" + s.Endpoint,
		"AWS_CONFIG_FILE=" + none, "AWS_SHARED_CREDENTIALS_FILE=" + none,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_PROFILE=",
	}
}

// Setenv sets Env in this process for the rest of the test.
func (s *Server) Setenv(t testing.TB) {
	for _, kv := range s.Env() {
		for i := range kv {
			if kv[i] == '=' {
				t.Setenv(kv[:i], kv[i+1:])
				break
			}
		}
	}
}

// WaitFor polls cond every 20 ms until it holds or timeout passes.
func WaitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not reached within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
