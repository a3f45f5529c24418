package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/dshfs/dshfs/internal/quote"
)

// DefaultStateDir is where a workspace's index lives: outside the workspace,
// under the user's state directory, one folder per real workspace path,
// named so a person can tell them apart: <last element>-<8 hex digits of a
// hash of the whole path>, e.g. ws-1f2e3d4c. A folder of the old name
// (ws-<16 hex digits>, whatever the workspace) is moved to the new name,
// unless a mount still uses it.
func DefaultStateDir(workspace string) (string, error) {
	real, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return "", fmt.Errorf("resolve workspace: %w", err)
	}
	base, err := userStateDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(real))
	dir := filepath.Join(base, "dshfs", stateName(real)+"-"+hex.EncodeToString(sum[:4]))
	legacy := filepath.Join(base, "dshfs", "ws-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(dir); err == nil || !isDir(legacy) {
		return dir, nil
	}
	return fromLegacy(legacy, dir, real), nil
}

// fromLegacy moves the state directory of the workspace real from its old
// name, legacy, to dir, and returns where it is now: still legacy if a
// mount uses it (its daemon serves its socket there) or it cannot move.
func fromLegacy(legacy, dir, real string) string {
	for _, m := range systemMounts() {
		if m.Backing == real {
			return legacy
		}
	}
	if err := os.Rename(legacy, dir); err != nil {
		return legacy
	}
	fmt.Fprintf(os.Stderr, "dshfs: moved the state directory %s to %s\n", quote.Name(legacy), quote.Name(dir))
	return dir
}

// stateName is the readable part of a state directory's name: the
// workspace's last element, letters, digits or ._- (anything else becomes
// _), cut to at most 32 bytes of whole letters. Bytes, not letters: the
// socket's path, in the directory, has a limit in bytes (checkSocketPath).
func stateName(workspace string) string {
	name := filepath.Base(workspace)
	if name == "/" || name == "." {
		name = "root"
	}
	var b strings.Builder
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("._-", r) {
			r = '_'
		}
		if b.Len()+utf8.RuneLen(r) > 32 {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// maxSocketPath is the longest path a Unix socket can be bound at: the
// kernel's sun_path less its terminating NUL (107 bytes on Linux, 103 on
// macOS).
var maxSocketPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// checkSocketPath refuses a state directory whose socket path is longer
// than the kernel takes, before anything is mounted: bind would fail with
// a bare "invalid argument".
func checkSocketPath(stateDir string) error {
	p := socketPath(stateDir)
	if len(p) <= maxSocketPath {
		return nil
	}
	return fmt.Errorf("the socket path %s is %d bytes, longer than the %d a socket's path may be: give a shorter state directory with --state",
		quote.Name(p), len(p), maxSocketPath)
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// userStateDir follows the XDG base directory spec on Linux and the
// platform's convention on macOS.
func userStateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the state directory: %w (set HOME or XDG_STATE_HOME)", err)
	}
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, "Library", "Application Support"), nil
	}
	return filepath.Join(home, ".local", "state"), nil
}

// PrepareStateDir makes the state directory dir if missing and refuses one
// that another user could change. Its owner could have left symbolic links
// in it to this user's files — the log is appended to, the index written,
// whoever runs the daemon — or swap them in at any time, so it must be
// this user's and writable by nobody else (but the user's own group), and
// each directory above it this user's or root's, writable by others only
// if sticky (as /tmp), where another user cannot rename it away. The check comes before
// anything in dir is opened; the files are still opened without following
// links (O_NOFOLLOW), in case one was left there before. It returns the
// directory with every link resolved: the path that was checked, and the
// one to use from then on — a link on the way given (say, in a directory
// of another user's) could be pointed elsewhere once the check is done.
func PrepareStateDir(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("make the state directory: %v", err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("resolve the state directory: %v", err)
	}
	uid := os.Geteuid()
	for p, own := real, true; ; p, own = filepath.Dir(p), false {
		if err := checkStateAncestor(dir, p, uid, own); err != nil {
			return "", err
		}
		if p == filepath.Dir(p) {
			return real, nil
		}
	}
}

// checkStateAncestor checks p, the state directory dir itself (own) or a
// directory above it, for a daemon running as uid.
func checkStateAncestor(dir, p string, uid int, own bool) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("check the state directory: %v", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	owner, perm := int(st.Uid), fi.Mode()
	others := perm.Perm() & 0o022
	if int(st.Gid) == os.Getegid() {
		// Writable by the user's own group: with a group of one's own (and
		// umask 002, as some systems set up users) that is every directory
		// the user makes.
		others &^= 0o020
	}
	switch {
	case own && owner != uid:
		return fmt.Errorf("the state directory %s belongs to uid %d, not to this user (uid %d): use a directory of your own with --state", dir, owner, uid)
	case own && others != 0:
		return fmt.Errorf("the state directory %s is writable by other users (mode %04o): run chmod go-w on it, or use another with --state", dir, perm.Perm())
	case !own && owner != uid && owner != 0:
		return fmt.Errorf("the state directory %s is inside %s, which belongs to uid %d, who could replace it: use a directory of your own with --state", dir, p, owner)
	case !own && others != 0 && perm&os.ModeSticky == 0:
		return fmt.Errorf("the state directory %s is inside %s, which other users may write (mode %04o): use a directory of your own with --state", dir, p, perm.Perm())
	}
	return nil
}
