package fusefs

import (
	"context"
	"syscall"

	"github.com/dshfs/dshfs/versionstore"
	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

var _ = (fs.NodeRenamer)((*node)(nil))

// Rename moves an entry in the backing tree and the index with it: a file's
// old path records a deletion and its new path the version it now holds
// (the replaced file's history continues there); a directory's entries move
// with their history, without rehashing.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	r := renameOp{n: n, np: np, name: name, newName: newName, flags: flags}
	done, errno := r.open()
	if errno != 0 {
		return errno
	}
	defer done()
	unlock, errno := r.lock()
	if errno != 0 {
		return errno
	}
	defer unlock()
	mv, errno := r.plan()
	if errno != 0 {
		return errno
	}
	return r.run(ctx, mv)
}

// renameOp is one RENAME request: name in n to newName in np.
type renameOp struct {
	n, np          *node
	name, newName  string
	flags          uint32
	oldKey, newKey string
	fd, nfd        int // the two directories
}

// open finds both keys and opens both directories.
func (r *renameOp) open() (func(), syscall.Errno) {
	var ok1, ok2 bool
	r.oldKey, ok1 = r.n.childKey(r.name)
	r.newKey, ok2 = r.np.childKey(r.newName)
	if !ok1 || !ok2 {
		return nil, syscall.ENOENT
	}
	fd, done, errno := r.n.dirFd()
	if errno != 0 {
		return nil, errno
	}
	nfd, ndone, errno := r.np.dirFd()
	if errno != 0 {
		done()
		return nil, errno
	}
	r.fd, r.nfd = fd, nfd
	return func() { ndone(); done() }, 0
}

// stat stats both names; target says whether the new one exists.
func (r *renameOp) stat() (st, nst unix.Stat_t, target bool, err error) {
	if err = unix.Fstatat(r.fd, r.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, nst, false, err
	}
	target = unix.Fstatat(r.nfd, r.newName, &nst, unix.AT_SYMLINK_NOFOLLOW) == nil
	return st, nst, target, nil
}

// lock takes both keys' locks, and first the moves lock when a directory
// moves or is replaced (before any file's lock, as an open takes them): no
// open for writing below counts its file as being written meanwhile.
func (r *renameOp) lock() (func(), syscall.Errno) {
	st, nst, target, err := r.stat()
	if err != nil {
		return nil, toErrno(err)
	}
	unlockMoves := func() {}
	if isDir(&st) || target && isDir(&nst) {
		unlockMoves = r.n.fsys.writers.holdMoves(true)
	}
	unlock := r.n.fsys.mount.Locks().Lock2(r.oldKey, r.newKey)
	return func() { unlock(); unlockMoves() }, 0
}

// plan says, under the locks, what the rename will move and replace.
func (r *renameOp) plan() (move, syscall.Errno) {
	st, nst, target, err := r.stat()
	if err != nil {
		return move{}, toErrno(err)
	}
	if errno := r.stale(); errno != 0 {
		return move{}, errno
	}
	return move{
		oldKey: r.oldKey, newKey: r.newKey,
		dir:       isDir(&st),
		targetDir: target && isDir(&nst),
		regular:   st.Mode&syscall.S_IFMT == syscall.S_IFREG,
		exchange:  r.flags&renameExchange != 0,
		moving:    childNode(r.n, r.name),
		displaced: childNode(r.np, r.newName),
		target:    nst,
	}, 0
}

// stale checks that both names hold the nodes the kernel means (see
// identity.go): it checked the sticky bit against the owners of the entry
// moving and of the one replaced. RENAME_NOREPLACE refuses any target by
// itself.
func (r *renameOp) stale() syscall.Errno {
	if errno := r.n.childIs(r.fd, r.name); errno != 0 {
		return errno
	}
	switch {
	case r.flags&renameNoreplace != 0:
		return 0
	case r.flags&renameExchange != 0:
		return r.np.childIs(r.nfd, r.newName)
	}
	return r.np.targetIs(r.nfd, r.newName)
}

// run renames in the backing tree and moves the index and the nodes' keys.
func (r *renameOp) run(ctx context.Context, mv move) syscall.Errno {
	r.n.noteSelfChild(r.name)
	r.np.noteSelfChild(r.newName)
	mount := r.n.fsys.mount
	// Both paths' bytes stay restorable: the file moved away and the one
	// replaced. For a directory, Preserve settles the tools' writes below
	// it (see versionstore's settle.go).
	mount.Preserve(mv.oldKey)
	absent := mount.Preserve(mv.newKey)
	created := absent && !mv.targetDir && mv.regular
	if err := renameat2(r.fd, r.name, r.nfd, r.newName, r.flags); err != nil {
		return toErrno(err)
	}
	if created {
		mount.Created(mv.newKey)
	}
	// go-fuse moves the nodes in its tree only after Rename returns; until
	// then their paths must already be the new ones, or an open or a
	// writer's commit in that moment lands on the old path.
	ws := r.n.fsys.writers
	if mv.moving != nil {
		ws.put(mv.moving.EmbeddedInode(), r.np.EmbeddedInode(), r.newName)
	}
	if mv.exchange && mv.displaced != nil {
		ws.put(mv.displaced.EmbeddedInode(), r.n.EmbeddedInode(), r.name)
	} else if mv.displaced != nil {
		mv.displaced.removed(&mv.target)
	}
	ws.moved(mv.oldKey, mv.newKey, mv.exchange)
	r.n.fsys.renamed(ctx, mv)
	return 0
}

func isDir(st *unix.Stat_t) bool { return st.Mode&syscall.S_IFMT == syscall.S_IFDIR }

// move is a rename, as the index must follow it.
type move struct {
	oldKey, newKey    string
	dir, targetDir    bool // what was at each path before
	regular           bool // the entry moving is a regular file
	exchange          bool
	moving, displaced *node       // the nodes at the old and new path before, if known
	target            unix.Stat_t // what the new path held, if anything
}

func childNode(parent *node, name string) *node {
	if c := parent.EmbeddedInode().GetChild(name); c != nil {
		n, _ := c.Operations().(*node)
		return n
	}
	return nil
}

// renamed updates the index after a rename. Callers hold both keys' locks.
func (f *FS) renamed(ctx context.Context, mv move) {
	w := f.actors.attribute(writer(ctx))
	switch {
	case mv.exchange && (mv.dir || mv.targetDir):
		f.logErr("move index", mv.oldKey, f.mount.ExchangeTree(mv.oldKey, mv.newKey, w))
	case mv.dir:
		f.logErr("move index", mv.oldKey, f.mount.MoveTree(mv.oldKey, mv.newKey, w))
		f.watch.moved(mv.oldKey, mv.newKey)
	default:
		// Each path records what it holds now, unless a process is still
		// writing that file: then it stays being written, and the writer's commit
		// records it. The journal links the two halves of a plain rename.
		if !mv.exchange {
			f.mount.NoteRename(mv.oldKey, mv.newKey)
		}
		f.settle(mv.newKey, mv.moving, w)
		if mv.exchange {
			f.settle(mv.oldKey, mv.displaced, w)
		} else {
			f.settle(mv.oldKey, nil, w) // gone
		}
	}
}

// settle records the version of key, which now holds n's file (nil: no
// file), unless n is being written: then its last writer's release commits
// it there. Callers hold key's lock.
func (f *FS) settle(key string, n *node, w versionstore.Writer) {
	if n != nil && f.writers.owe(n) {
		return
	}
	f.refresh(nil, key, w)
}
