//go:build !linux

package fusefs

import "errors"

// watcher is Linux-only (inotify); elsewhere the cache timeout stays short.
type watcher struct{}

var errWatchLimit = errors.New("watching the backing tree is not supported on this platform")

func startWatcher(f *FS) (*watcher, error)     { return nil, errWatchLimit }
func (w *watcher) noteSelf(dir, name string)   {}
func (w *watcher) moved(oldDir, newDir string) {}
func (w *watcher) close()                      {}
func (w *watcher) start()                      {}
