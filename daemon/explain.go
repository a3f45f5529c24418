package daemon

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// logSize is how much the daemon's log holds now (-1 if it has none):
// fusermount3 writes why it failed there, on the daemon's standard error.
func logSize(stateDir string) int64 {
	fi, err := os.Lstat(filepath.Join(stateDir, LogFileName))
	if err != nil {
		return -1
	}
	return fi.Size()
}

// fusermountSaid returns what fusermount3 wrote to the log since offset.
func fusermountSaid(stateDir string, offset int64) []string {
	if offset < 0 {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(stateDir, LogFileName), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, offset, 64<<10))
	var said []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "fusermount") && !strings.HasPrefix(line, "time=") {
			said = append(said, strings.TrimSpace(line))
		}
	}
	return said
}

// explainMountFailure says why the mount failed in fusermount3's own words
// when it spoke, and how to fix what this machine lacks.
func explainMountFailure(err error, said []string, allowOther bool) error {
	msg := strings.TrimSpace(err.Error())
	if len(said) > 0 {
		msg = "mount failed: " + strings.Join(said, "; ")
	}
	if hint := fuseHint(allowOther); hint != "" {
		msg += "; " + hint
	}
	return errors.New(msg)
}
