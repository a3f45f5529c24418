package fusefs

import (
	"path"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// unwatchedTimeout bounds how long the kernel trusts entries and
// attributes from a directory the watcher does not watch (past the mount's
// cap on watches, or the user's inotify limit): a change made straight
// into the backing directory there shows within it.
const unwatchedTimeout = time.Second

// timeoutIn is how long the kernel may trust the entries of the directory
// at dir ("" the root) and their attributes: the mount's cache timeout
// while the watcher sees that directory's changes, unwatchedTimeout at
// most otherwise. inotify reports a change of an entry's attributes to the
// directory holding it.
func (f *FS) timeoutIn(dir string, known bool) time.Duration {
	if f.watch == nil || f.watch.whole() || (known && f.watch.watched(dir)) {
		return f.timeout
	}
	return min(f.timeout, unwatchedTimeout)
}

// entryTimeout is timeoutIn for the entries of the directory n.
func (n *node) entryTimeout() time.Duration {
	if n.fsys.watch == nil || n.fsys.watch.whole() {
		return n.fsys.timeout
	}
	p, ok := n.relPath()
	return n.fsys.timeoutIn(p, ok)
}

// attrTimeout is how long the kernel may trust n's attributes: as long as
// the entries of its directory (the root's own watch for the root).
func (n *node) attrTimeout() time.Duration {
	if n.fsys.watch == nil || n.fsys.watch.whole() {
		return n.fsys.timeout
	}
	p, ok := n.relPath()
	if dir := path.Dir(p); p != "" {
		p = dir
		if p == "." {
			p = ""
		}
	}
	return n.fsys.timeoutIn(p, ok)
}

// setEntryTimeout gives out, an entry in the directory n, its timeouts
// when they are not the mount's (go-fuse fills in the mount's).
func (n *node) setEntryTimeout(out *fuse.EntryOut) {
	if t := n.entryTimeout(); t != n.fsys.timeout {
		out.SetEntryTimeout(t)
		out.SetAttrTimeout(t)
	}
}
