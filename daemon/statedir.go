package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unicode"

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
// workspace's last element, at most 32 letters, digits or ._- (anything
// else becomes _).
func stateName(workspace string) string {
	name := filepath.Base(workspace)
	if name == "/" || name == "." {
		name = "root"
	}
	var b strings.Builder
	for i, r := range []rune(name) {
		if i == 32 {
			break
		}
		if unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._-", r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
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
