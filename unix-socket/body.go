package unixsocket

import (
	"io"
	"runtime/debug"
	"slices"
	"time"
)

// Request bodies. A body's buffer grows with the bytes that arrive, never
// ahead of them: a Content-Length costs nothing until its bytes come, so a
// client that announces 64 MiB and sends one byte costs a few KiB, not
// 64 MiB. The buffer doubles, so a large body is copied about once more
// than it is read.

const (
	minBodyBuf = 4 << 10  // the first allocation for a body
	largeBody  = 16 << 20 // from this size a body's buffer is given back to the OS when done
)

// growBody makes room in buf for more of a body of at most n bytes.
func growBody(buf []byte, n int64) []byte {
	size := min(n, int64(max(2*cap(buf), minBodyBuf)))
	return slices.Grow(buf, int(size)-len(buf))
}

// readAll reads r to its end, or up to n bytes (r enforces any limit).
func readAll(r io.Reader, n int64) ([]byte, error) {
	var buf []byte
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			buf = growBody(buf, n)
		}
		m, err := r.Read(buf[len(buf):min(int64(cap(buf)), n)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// releaseLarge gives the memory of a large body's buffer, which the caller
// has let go of, back to the OS soon. The runtime returns freed memory
// only after a collection, and an idle daemon collects every two minutes:
// resident memory would stay at its peak that long after a burst of large
// writes. debug.FreeOSMemory costs a collection, so it runs a second after
// the body (its buffer unreachable by then) and at most every ten seconds,
// however many large bodies end.
func (s *Server) releaseLarge(size int) {
	if size < largeBody || !s.releasing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		time.Sleep(max(time.Second, time.Until(s.lastRelease.Add(10*time.Second))))
		s.lastRelease = time.Now() // only the goroutine holding releasing touches it
		s.releasing.Store(false)   // a body ending from now on needs a release of its own
		debug.FreeOSMemory()
	}()
}
