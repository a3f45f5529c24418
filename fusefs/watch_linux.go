package fusefs

import (
	"errors"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watcher follows changes made straight into the backing directory — by a
// process that does not go through the mount — and drops exactly what the
// kernel caches for them, so the kernel can be trusted with long entry,
// attribute and page-cache lifetimes. It watches every directory with
// inotify. The daemon's own changes (every FUSE operation that writes the
// backing tree) are noted first and their events ignored: the kernel already
// knows about them, and invalidating them would throw its caches away.
type watcher struct {
	fsys *FS
	fd   int
	file *os.File // fd, in the runtime poller so that close wakes the reader

	max int // watches at most (Options.MaxWatches)
	// partial is set once a directory went unwatched (the cap, or the
	// machine's inotify limit): from then on the timeouts the kernel is
	// given depend on the directory (FS.timeoutIn).
	partial atomic.Bool

	mu   sync.Mutex
	dirs map[int]string       // watch descriptor → directory key ("" for the root)
	wds  map[string]int       // directory key → watch descriptor
	self map[string]time.Time // dir key 0x00 name → when the daemon last changed it
}

const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF

// selfWindow is, by default, how long an event is taken for the daemon's own change.
// inotify does not say who made a change, so a change made straight into
// the backing tree to the same name within this window of one made through
// the mount shows only once the cache timeout passes. An event read later
// than this (the watcher lagging under load) only costs an extra
// invalidation.
const selfWindow = 100 * time.Millisecond

// errWatchLimit means the tree has more directories than inotify may watch.
var errWatchLimit = errors.New("too many directories to watch")

// startWatcher watches the directories of the backing tree, at most max.
func startWatcher(f *FS, max int) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	w := &watcher{fsys: f, fd: fd, file: os.NewFile(uintptr(fd), "inotify"), max: max,
		dirs: map[int]string{}, wds: map[string]int{}, self: map[string]time.Time{}}
	if err := w.addTree(""); err != nil && !w.watched("") {
		w.file.Close()
		return nil, err
	}
	return w, nil
}

// whole reports whether every directory is watched (none was refused).
func (w *watcher) whole() bool { return !w.partial.Load() }

// watched reports whether the directory at key is watched.
func (w *watcher) watched(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.wds[key]
	return ok
}

// start handles events; call it once the filesystem is mounted.
func (w *watcher) start() {
	if w != nil {
		go w.run()
	}
}

// addTree watches dir and every directory below it.
func (w *watcher) addTree(dir string) error {
	if err := w.add(dir); err != nil {
		return err
	}
	fd, done, err := w.fsys.openDir(dir)
	if err != nil {
		return nil // gone meanwhile
	}
	defer done()
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(dfd)
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(dfd, buf)
		if err != nil || n <= 0 {
			return nil
		}
		for off := 0; off < n; {
			d := (*unix.Dirent)(unsafe.Pointer(&buf[off]))
			off += int(d.Reclen)
			name := direntName(d)
			if d.Type == unix.DT_DIR && name != "." && name != ".." {
				if err := w.addTree(path.Join(dir, name)); err != nil {
					return err
				}
			}
		}
	}
}

func direntName(d *unix.Dirent) string {
	b := (*[256]byte)(unsafe.Pointer(&d.Name[0]))
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b[:])
}

// add watches one directory, through its descriptor so the path length
// never matters.
func (w *watcher) add(dir string) error {
	fd, done, err := w.fsys.openDir(dir)
	if err != nil {
		return nil
	}
	defer done()
	w.mu.Lock()
	_, again := w.wds[dir]
	full := len(w.wds) >= w.max && !again
	w.mu.Unlock()
	if full {
		return w.unwatched(dir, "the mount's watch limit")
	}
	wd, err := unix.InotifyAddWatch(w.fd, "/proc/self/fd/"+itoa(fd), watchMask)
	if errors.Is(err, unix.ENOSPC) {
		return w.unwatched(dir, "the user's inotify limit (fs.inotify.max_user_watches)")
	}
	if err != nil {
		return nil
	}
	w.mu.Lock()
	w.dirs[wd], w.wds[dir] = dir, wd
	w.mu.Unlock()
	return nil
}

// unwatched notes that dir, and so the directories below it, go
// unwatched, saying so the first time.
func (w *watcher) unwatched(dir, why string) error {
	if !w.partial.Swap(true) {
		w.fsys.log.Warn("not watching every directory of the backing tree; outside changes in the others show within 1 s",
			"reached", why, "watches", w.max, "first_unwatched", dir)
	}
	return errWatchLimit
}

// noteSelf records that the daemon is about to change dir/name.
func (w *watcher) noteSelf(dir, name string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.self[dir+"\x00"+name] = time.Now()
	w.mu.Unlock()
}

// moved rekeys the watches of a directory renamed through the mount.
func (w *watcher) moved(oldDir, newDir string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for wd, d := range w.dirs {
		if d == oldDir || strings.HasPrefix(d, oldDir+"/") {
			nd := newDir + strings.TrimPrefix(d, oldDir)
			delete(w.wds, d)
			w.dirs[wd], w.wds[nd] = nd, wd
		}
	}
}

func (w *watcher) close() {
	if w != nil {
		w.file.Close()
	}
}

// run reads events until the inotify descriptor is closed.
func (w *watcher) run() {
	buf := make([]byte, 64<<10)
	for {
		n, err := w.file.Read(buf)
		if err != nil || n <= 0 {
			return // closed at unmount
		}
		now := time.Now()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			w.handle(int(ev.Wd), ev.Mask, strings.TrimRight(string(nameBytes), "\x00"), now)
		}
		w.prune(now)
	}
}

func (w *watcher) handle(wd int, mask uint32, name string, now time.Time) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		// Events were dropped: what changed is unknown until the cache
		// timeout passes.
		w.fsys.log.Warn("backing tree watch overflowed; outside changes may show late")
		return
	}
	w.mu.Lock()
	dir, ok := w.dirs[wd]
	if mask&unix.IN_IGNORED != 0 {
		delete(w.dirs, wd)
		if w.wds[dir] == wd {
			delete(w.wds, dir)
		}
	}
	t, mine := w.self[dir+"\x00"+name]
	w.mu.Unlock()
	if !ok || name == "" {
		return
	}
	if mask&unix.IN_ISDIR != 0 && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
		w.addTree(path.Join(dir, name)) // whoever made it, it needs watching
	}
	if mine && now.Sub(t) < w.fsys.selfWindow {
		return
	}
	w.fsys.invalidateOutside(dir, name, mask&(unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0)
}

func (w *watcher) prune(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.self) < 4096 {
		return
	}
	for k, t := range w.self {
		if now.Sub(t) >= w.fsys.selfWindow {
			delete(w.self, k)
		}
	}
}
