//go:build !linux

package fusefs

import (
	"errors"
	"time"
)

// watcher is Linux-only (inotify); elsewhere the cache timeout stays short.
type watcher struct{}

// selfWindow: without a watcher there is no own-change window.
const selfWindow time.Duration = 0

var errWatchLimit = errors.New("watching the backing tree is not supported on this platform")

func startWatcher(f *FS, max int) (*watcher, error) { return nil, errWatchLimit }
func (w *watcher) noteSelf(dir, name string)        {}
func (w *watcher) watched(key string) bool          { return false }
func (w *watcher) whole() bool                      { return false }
func (w *watcher) moved(oldDir, newDir string)      {}
func (w *watcher) close()                           {}
func (w *watcher) start()                           {}
