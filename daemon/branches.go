package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/fusefs"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
)

// The daemon serves a workspace's branches (docs/branches.md). Each is
// two mounts in this process: a private view (fusefs.BranchView, under the
// branch's directory in the state directory, 0700) joining the branch's
// own files over a snapshot of the workspace, and an ordinary dshfs mount
// of that view at MOUNTPOINT@NAME, with its own index and socket, so that
// writes in the branch are versioned, attributed and logged like any.
//
// A branch's directory, <state>/branches/NAME, holds branch.json, upper/
// (its files), frozen/ (the branch point's bytes of files the workspace
// changed since), index.json (its whiteouts), view/ (the view's mount
// point) and state/ (its mount's state directory).

// branchMeta is branch.json.
type branchMeta struct {
	Name       string    `json:"name"`
	Actor      string    `json:"actor,omitempty"`
	Checkpoint string    `json:"checkpoint"`
	MountPoint string    `json:"mount_point"`
	Created    time.Time `json:"created"`
}

// branch is a served branch.
type branch struct {
	meta  branchMeta
	dir   string
	view  *fusefs.BranchView
	mount *mount
	stop  func()
}

// branches are the workspace's served branches.
type branches struct {
	m     *mount // the workspace's
	umask os.FileMode
	mu    sync.Mutex
	all   map[string]*branch
}

var branchName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ErrBranch wraps a branch request's refusals.
var ErrBranch = unixsocket.ErrBranchRefused

func (b *branches) root() string { return filepath.Join(b.m.cfg.StateDir, "branches") }

// New makes the branch name for actor and serves it.
func (b *branches) New(name, actor string) (unixsocket.BranchInfo, error) {
	if !branchName.MatchString(name) {
		return unixsocket.BranchInfo{}, fmt.Errorf("%w name %q: letters, digits, '.', '_' and '-', at most 64", ErrBranch, name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	dir := filepath.Join(b.root(), name)
	if _, err := os.Lstat(dir); err == nil {
		return unixsocket.BranchInfo{}, fmt.Errorf("%w %q exists", ErrBranch, name)
	}
	meta := branchMeta{Name: name, Actor: actor, Checkpoint: "branch:" + name, MountPoint: b.m.cfg.MountPoint + "@" + name, Created: time.Now().UTC()}
	if err := b.prepare(dir, meta); err != nil {
		removeBranchDir(dir)
		return unixsocket.BranchInfo{}, err
	}
	if _, err := b.m.store.MarkCheckpoint(meta.Checkpoint); err != nil {
		removeBranchDir(dir)
		if errors.Is(err, versionstore.ErrCheckpointExists) {
			err = fmt.Errorf("%w %q: %w (dshfs checkpoint rm %s frees the name)", ErrBranch, name, err, meta.Checkpoint)
		}
		return unixsocket.BranchInfo{}, err
	}
	br, err := b.serve(dir, meta)
	if err != nil {
		b.m.store.RemoveCheckpoint(meta.Checkpoint)
		removeBranchDir(dir)
		return unixsocket.BranchInfo{}, err
	}
	b.all[name] = br
	info := br.info(0)
	if b.m.cfg.AllowOther {
		info.Note = fmt.Sprintf("the workspace is open to other users (--allow-other), the branch at %s is not: only uid %d uses it (a branch does not serve the workspace's ACLs)", meta.MountPoint, os.Geteuid())
	}
	return info, nil
}

// prepare makes the branch's directory and records it.
func (b *branches) prepare(dir string, meta branchMeta) error {
	if err := os.MkdirAll(b.root(), 0o700); err != nil {
		return err
	}
	for _, d := range []string{dir, "upper", "frozen", "view", "state"} {
		if d != dir {
			d = filepath.Join(dir, d)
		}
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	err := os.Mkdir(meta.MountPoint, 0o755) // never through a symlink there
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("make the branch's mount point: %w", err)
	}
	if cerr := b.checkMountPoint(meta.MountPoint); cerr != nil {
		if err == nil {
			os.Remove(meta.MountPoint)
		}
		return cerr
	}
	js, _ := json.MarshalIndent(meta, "", "  ")
	return os.WriteFile(filepath.Join(dir, "branch.json"), js, 0o600)
}

// serve mounts the branch's view and its ordinary mount.
func (b *branches) serve(dir string, meta branchMeta) (*branch, error) {
	snap, err := b.m.store.Snapshot(meta.Checkpoint)
	if err != nil {
		return nil, err
	}
	// A daemon killed outright left its view mounted, dead.
	if _, err := recoverStaleMount(filepath.Join(dir, "view")); err != nil {
		return nil, err
	}
	view, err := fusefs.MountBranchView(filepath.Join(dir, "view"), b.m.store, snap, fusefs.BranchViewOptions{
		Upper: filepath.Join(dir, "upper"), Frozen: filepath.Join(dir, "frozen"), Index: filepath.Join(dir, "index.json"),
		CacheTimeout: b.cacheTimeout(), Debug: b.m.cfg.Debug})
	if err != nil {
		return nil, err
	}
	if err := b.checkMountPoint(meta.MountPoint); err != nil {
		view.Unmount()
		return nil, err
	}
	cfg := b.m.cfg
	// The view serves neither ACLs nor other users' permission checks as
	// the workspace does: a branch is its daemon's user's alone.
	cfg.AllowOther = false
	cfg.Backing, cfg.MountPoint, cfg.StateDir = filepath.Join(dir, "view"), meta.MountPoint, filepath.Join(dir, "state")
	cfg.Remote, cfg.Baseline, cfg.ReplacedDeadMount, cfg.Branch = "", false, false, meta.Name
	cfg.CacheTimeout = b.cacheTimeout()
	bm := &mount{cfg: cfg, log: b.m.log.With("branch", meta.Name), isBranch: true}
	stop, err := bm.start(b.umask)
	if err != nil {
		view.Unmount()
		return nil, err
	}
	bm.fsys.Actors().SetDefault(meta.Actor)
	return &branch{meta: meta, dir: dir, view: view, mount: bm, stop: stop}, nil
}

// cacheTimeout is how long the kernel may trust what it caches from a
// branch's mount and from its view: the workspace's --cache-timeout, else
// 30 s, as nothing but the branch's mount changes its view.
func (b *branches) cacheTimeout() time.Duration {
	if t := b.m.cfg.CacheTimeout; t != 0 {
		return t
	}
	return 30 * time.Second
}

// checkMountPoint refuses a branch's mount point that is not a real
// directory (a symlink planted in the workspace mount point's parent would
// take the mount elsewhere), belongs to another user than the daemon's or
// the workspace mount point's, holds files, or is already mounted on.
func (b *branches) checkMountPoint(mnt string) error {
	fi, err := os.Lstat(mnt) // a symlink's own, never where it points
	// A dead mount's root may still stat from the kernel's cache: a real
	// directory is asked with statfs too.
	if errors.Is(err, syscall.ENOTCONN) || err == nil && fi.IsDir() {
		if _, err := recoverStaleMount(mnt); err != nil {
			return err
		}
		fi, err = os.Lstat(mnt)
	}
	if err != nil {
		return fmt.Errorf("branch mount point: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: mount point %s is a %s, not a directory; remove it", ErrBranch, mnt, fileKind(fi))
	}
	if uid := fileUID(fi); uid != os.Geteuid() && uid != fileUID(b.mountPointInfo()) {
		return fmt.Errorf("%w: mount point %s belongs to uid %d, neither the daemon's user nor the workspace mount point's owner; remove it", ErrBranch, mnt, uid)
	}
	return checkMountPoint(mnt, false)
}

func (b *branches) mountPointInfo() fs.FileInfo {
	fi, _ := os.Lstat(b.m.cfg.MountPoint)
	return fi
}

// fileUID is fi's owner (-1: unknown).
func fileUID(fi fs.FileInfo) int {
	if fi == nil {
		return -1
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// fileKind names what fi is, for a refusal.
func fileKind(fi fs.FileInfo) string {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return "symlink"
	}
	return "file"
}

// resume serves the branches recorded in the state directory.
func (b *branches) resume() {
	ents, _ := os.ReadDir(b.root())
	for _, e := range ents {
		dir := filepath.Join(b.root(), e.Name())
		var meta branchMeta
		js, err := os.ReadFile(filepath.Join(dir, "branch.json"))
		if err == nil {
			err = json.Unmarshal(js, &meta)
		}
		var br *branch
		if err == nil {
			br, err = b.serve(dir, meta)
		}
		if err != nil {
			b.m.log.Error("serve a branch", "dir", dir, "err", err)
			continue
		}
		b.all[meta.Name] = br
	}
}

// close stops serving every branch (the workspace's store stays open).
func (b *branches) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, br := range b.all {
		br.close(b.m.log)
		delete(b.all, name)
	}
}

func (br *branch) close(log interface{ Warn(string, ...any) }) {
	br.mount.drain()
	if err := br.mount.fsys.Unmount(); err != nil {
		log.Warn("unmount a branch", "branch", br.meta.Name, "err", err)
	}
	br.stop()
	if err := br.view.Unmount(); err != nil {
		log.Warn("unmount a branch's view", "branch", br.meta.Name, "err", err)
	}
}

func (b *branches) get(name string) (*branch, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	br := b.all[name]
	if br == nil {
		return nil, fmt.Errorf("%w %q: no such branch", ErrBranch, name)
	}
	return br, nil
}

// Drop stops serving the branch and deletes it; without force, a branch
// with a file open for writing is kept.
func (b *branches) Drop(name string, force bool) error {
	br, err := b.get(name)
	if err != nil {
		return err
	}
	if w := br.view.SettledWriting(versionstore.MergeWriterGrace); len(w) > 0 && !force {
		return fmt.Errorf("%w %q has %d files open for writing; close them, or drop it with --force", ErrBranch, name, len(w))
	}
	b.mu.Lock()
	delete(b.all, name)
	b.mu.Unlock()
	br.close(b.m.log)
	b.m.store.RemoveCheckpoint(br.meta.Checkpoint)
	os.Remove(br.meta.MountPoint)
	return removeBranchDir(br.dir)
}

// removeBranchDir deletes a branch's files. It never descends into view/:
// a view left mounted (detached lazily) is removed once it is gone.
func removeBranchDir(dir string) error {
	if js, err := os.ReadFile(filepath.Join(dir, "branch.json")); err == nil {
		var meta branchMeta
		if json.Unmarshal(js, &meta) == nil && meta.MountPoint != "" {
			os.Remove(meta.MountPoint) // only if empty: not mounted
		}
	}
	for _, d := range []string{"upper", "frozen", "state", "branch.json", "index.json", "index.json.tmp"} {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			return err
		}
	}
	os.Remove(filepath.Join(dir, "view"))
	return os.Remove(dir)
}

// List describes every branch.
func (b *branches) List() ([]unixsocket.BranchInfo, error) {
	b.mu.Lock()
	names := make([]string, 0, len(b.all))
	for name := range b.all {
		names = append(names, name)
	}
	b.mu.Unlock()
	sort.Strings(names)
	out := []unixsocket.BranchInfo{}
	for _, name := range names {
		res, err := b.Merge(context.Background(), name, versionstore.MergeOptions{DryRun: true})
		if err != nil {
			return nil, err
		}
		br, err := b.get(name)
		if err != nil {
			continue
		}
		info := br.info(res.Conflicts)
		for _, it := range res.Items {
			if it.Op != "same" {
				info.Changed++
			}
		}
		out = append(out, info)
	}
	return out, nil
}

func (br *branch) info(conflicts int) unixsocket.BranchInfo {
	return unixsocket.BranchInfo{Name: br.meta.Name, Actor: br.meta.Actor, MountPoint: br.meta.MountPoint,
		Checkpoint: br.meta.Checkpoint, Created: br.meta.Created, Conflicts: conflicts}
}

// Merge merges the branch into the workspace (a plan only with DryRun).
func (b *branches) Merge(ctx context.Context, name string, o versionstore.MergeOptions) (versionstore.MergeResult, error) {
	br, err := b.get(name)
	if err != nil {
		return versionstore.MergeResult{}, err
	}
	if o.Lines {
		if o.LineMerge, err = gitLineMerge(); err != nil {
			return versionstore.MergeResult{}, fmt.Errorf("%w %s: %w", ErrBranch, name, err)
		}
	}
	changes, err := br.view.Changes()
	if err != nil {
		return versionstore.MergeResult{}, err
	}
	changes, gits, err := b.gitChanges(ctx, br, changes)
	if err != nil {
		return versionstore.MergeResult{}, err
	}
	var ignored []versionstore.IgnoredPaths
	if !o.IncludeIgnored {
		if changes, ignored, err = leaveIgnored(ctx, b.m.cfg.Backing, changes); err != nil {
			return versionstore.MergeResult{}, fmt.Errorf("%w %s: which paths git ignores: %w (--include-ignored merges them all)", ErrBranch, name, err)
		}
	}
	res, err := b.m.store.Merge(ctx, name, br.meta.Checkpoint, changes, o)
	res.Git, res.Ignored = gits, ignored
	return res, err
}
