package versionstore

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// readExtents fills buf, zeros as long as the file fi of f was at its
// stat, from the file's data extents alone when it has holes
// (SEEK_DATA/SEEK_HOLE): reading a hole only copies zeros. It returns how
// many bytes of buf hold the file so far, and leaves f's offset there:
// len(buf) when it read every extent and the file has that size still, 0
// (read it all plainly) for a file without holes, or when its extents or
// size moved during the read. An error is one of setting f's offset.
func readExtents(f *os.File, fi fs.FileInfo, buf []byte) (int, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Blocks*512 >= st.Size || len(buf) == 0 {
		return 0, nil
	}
	fd := int(f.Fd())
	size := int64(len(buf))
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // a hole to the end
		}
		if err != nil {
			return rewound(f)
		}
		if start >= size {
			break // data past the size read at the stat: growth, read on
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return rewound(f)
		}
		end = min(end, size)
		if _, err := f.ReadAt(buf[start:end], start); err != nil {
			return rewound(f)
		}
		off = end
	}
	var now unix.Stat_t
	if unix.Fstat(fd, &now) != nil || now.Size != size {
		return rewound(f)
	}
	_, err := f.Seek(size, io.SeekStart)
	return int(size), err
}

// rewound sets f's offset back to the start for a plain read: 0 bytes of
// the file are read.
func rewound(f *os.File) (int, error) {
	_, err := f.Seek(0, io.SeekStart)
	return 0, err
}
