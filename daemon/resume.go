package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dshfs/dshfs/versionstore"
	"github.com/dshfs/dshfs/versionstore/remote"
)

// resumeTimeout bounds fetching a replicated history and building the
// workspace from it.
const resumeTimeout = time.Hour

// ErrResumeNotEmpty is wrapped by the error of a --from into a backing
// directory that holds files or a state directory that holds a history.
var ErrResumeNotEmpty = errors.New("not empty")

// CheckResumeBacking refuses a backing directory that is not empty:
// --from builds the workspace there, and must not mix it with files of
// another.
func CheckResumeBacking(backing string) error {
	names, err := os.ReadDir(backing)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		return fmt.Errorf("the backing directory %s is %w (it holds %s): --from builds the workspace in an empty directory, so that none of its files is mixed with another's; give a new one", backing, ErrResumeNotEmpty, names[0].Name())
	}
	return nil
}

// resume builds the workspace from the history cfg.From names, if set:
// its history goes into the store (log, show and rewind work here), its
// files, directories and symlinks into the empty backing directory as of
// the newest version, then, with cfg.At, rewound to that checkpoint. The
// history then goes on at cfg.Remote, cfg.From if none (which fences the
// dshfs that replicated there).
func (m *mount) resume() error {
	if m.cfg.From == "" {
		return nil
	}
	if err := m.checkResumable(); err != nil {
		return err
	}
	loc, err := remote.ParseLocation(m.cfg.From)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), resumeTimeout)
	defer cancel()
	t0 := time.Now()
	files, err := m.materialise(ctx, loc)
	if err != nil {
		return fmt.Errorf("resume from %s: %w", loc, err)
	}
	if m.cfg.At != "" {
		res, err := m.store.Rewind(ctx, m.cfg.At, versionstore.RewindOptions{Writer: versionstore.Writer{Kind: versionstore.WriterRestore, Actor: "dshfs"}})
		if err != nil {
			return fmt.Errorf("resume from %s at %s: %w", loc, m.cfg.At, err)
		}
		m.log.Info("rewound to the checkpoint", "checkpoint", m.cfg.At, "changes", len(res.Actions), "conflicts", res.Conflicts)
	}
	if m.cfg.Remote == "" {
		m.cfg.Remote = loc.String()
	}
	if same, _ := remote.ParseLocation(m.cfg.Remote); same == loc {
		m.cfg.RemoteTakeover = true // the same history goes on from here
	}
	m.log.Info("resumed the workspace", "from", loc.String(), "files", files, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// checkResumable refuses a backing directory with files or a store with a
// history: --from starts both.
func (m *mount) checkResumable() error {
	if err := CheckResumeBacking(m.cfg.Backing); err != nil {
		return err
	}
	seq, err := m.store.JournalSeq()
	if err != nil {
		return err
	}
	if seq > 0 {
		return fmt.Errorf("the state directory %s %w: it holds the history of a workspace already (%d journal entries); --from needs a new one (--state)", m.cfg.StateDir, ErrResumeNotEmpty, seq)
	}
	return nil
}

// materialise fetches the history at loc into the store and builds its
// newest workspace; it returns the number of entries made.
func (m *mount) materialise(ctx context.Context, loc remote.Location) (int, error) {
	b, err := remote.OpenBucket(ctx, loc)
	if err != nil {
		return 0, err
	}
	hist, err := remote.Fetch(ctx, b)
	if err != nil {
		return 0, err
	}
	if err := hasCheckpoint(hist.Checkpoints, m.cfg.At); err != nil {
		return 0, err // before anything is made
	}
	objs, damaged, err := hist.Objects(ctx)
	if err != nil {
		return 0, err
	}
	for _, d := range damaged {
		m.log.Warn("a remote object failed its check and is left out", "err", d)
	}
	ws, err := hist.Workspace(ctx)
	if err != nil {
		return 0, err
	}
	if err := m.store.ImportHistory(hist.Entries, hist.Checkpoints, objs); err != nil {
		return 0, err
	}
	missing, err := m.store.Populate(ws, func(v versionstore.Version) ([]byte, error) {
		if data, ok := objs[v]; ok {
			return data, nil
		}
		return nil, fmt.Errorf("%s: %w (not in the bucket)", v.Short(), versionstore.ErrNotKept)
	})
	for _, miss := range missing {
		m.log.Warn("a file's bytes are not in the bucket; it is left out", "err", miss)
	}
	return len(ws) - len(missing), err
}

// hasCheckpoint refuses a --at that names no checkpoint of cps.
func hasCheckpoint(cps []versionstore.Checkpoint, name string) error {
	if name == "" {
		return nil
	}
	var names []string
	for _, cp := range cps {
		if cp.Name == name {
			return nil
		}
		names = append(names, cp.Name)
	}
	return fmt.Errorf("no checkpoint %q in that history (it has: %s); dshfs checkpoints --remote lists them", name, strings.Join(names, ", "))
}
