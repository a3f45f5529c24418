package fusefs

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The few io_uring calls the FUSE transport needs (uring_linux.go): one
// ring of 128-byte submission entries, mapped once, written by one thread.
// Written against include/uapi/linux/io_uring.h.

const (
	ioringSetupSQE128       = 1 << 10
	ioringSetupSingleIssuer = 1 << 12
	ioringSetupDeferTaskrun = 1 << 13
	ioringFeatSingleMmap    = 1 << 0
	ioringEnterGetevents    = 1 << 0
	ioringOffSQRing         = 0
	ioringOffSQEs           = 0x10000000
	ioringOpRead            = 22
	ioringOpURingCmd        = 46
	sqeSize                 = 128
	cqeSize                 = 16
)

// uringParams is struct io_uring_params.
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  [10]uint32 // head tail ring_mask ring_entries flags dropped array resv1 user_addr(u64)
	cqOff                                                                  [10]uint32 // head tail ring_mask ring_entries overflow cqes flags resv1 user_addr(u64)
}

// cqe is struct io_uring_cqe.
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

type ring struct {
	fd             int
	mem, sqeMem    []byte
	sqHead, sqTail *uint32
	cqHead, cqTail *uint32
	sqMask, cqMask uint32
	sqEntries      uint32
	sqArray        []uint32
	cqes           []cqe
	tail           uint32 // our next SQ tail, published by enter
}

// newRing sets up a ring of entries submission entries for the calling
// thread, which alone may submit to it.
func newRing(entries uint32) (*ring, error) {
	p := uringParams{flags: ioringSetupSQE128 | ioringSetupSingleIssuer | ioringSetupDeferTaskrun}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd)}
	if err := r.mapRings(&p); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ring) mapRings(p *uringParams) error {
	if p.features&ioringFeatSingleMmap == 0 {
		return fmt.Errorf("io_uring: the kernel maps its rings separately (too old)")
	}
	size := max(p.sqOff[6]+p.sqEntries*4, p.cqOff[5]+p.cqEntries*cqeSize)
	mem, err := unix.Mmap(r.fd, ioringOffSQRing, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("map io_uring: %w", err)
	}
	r.mem = mem
	if r.sqeMem, err = unix.Mmap(r.fd, ioringOffSQEs, int(p.sqEntries*sqeSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("map io_uring entries: %w", err)
	}
	u32 := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
	r.sqHead, r.sqTail, r.sqMask, r.sqEntries = u32(p.sqOff[0]), u32(p.sqOff[1]), *u32(p.sqOff[2]), p.sqEntries
	r.cqHead, r.cqTail, r.cqMask = u32(p.cqOff[0]), u32(p.cqOff[1]), *u32(p.cqOff[2])
	r.sqArray = unsafe.Slice(u32(p.sqOff[6]), p.sqEntries)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&mem[p.cqOff[5]])), p.cqEntries)
	r.tail = *r.sqTail
	return nil
}

func (r *ring) close() {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
	}
	if r.mem != nil {
		unix.Munmap(r.mem)
	}
	unix.Close(r.fd)
}

// sqe returns a cleared submission entry, submitting what is queued first
// if the ring is full.
func (r *ring) sqe() ([]byte, error) {
	for r.tail-atomic.LoadUint32(r.sqHead) >= r.sqEntries {
		if err := r.enter(false); err != nil {
			return nil, err
		}
	}
	i := r.tail & r.sqMask
	r.sqArray[i] = i
	r.tail++
	s := r.sqeMem[i*sqeSize : (i+1)*sqeSize]
	clear(s)
	return s, nil
}

// enter submits the queued entries and, if wait, waits for a completion.
func (r *ring) enter(wait bool) error {
	atomic.StoreUint32(r.sqTail, r.tail)
	var flags, min uintptr
	if wait {
		flags, min = ioringEnterGetevents, 1
	}
	for {
		n := r.tail - atomic.LoadUint32(r.sqHead)
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(n), min, flags, 0, 0)
		switch errno {
		case 0:
			return nil
		case unix.EINTR, unix.EAGAIN, unix.EBUSY:
			continue
		}
		return fmt.Errorf("io_uring_enter: %w", errno)
	}
}

// reap hands every completion to fn.
func (r *ring) reap(fn func(cqe)) {
	head, tail := *r.cqHead, atomic.LoadUint32(r.cqTail)
	for ; head != tail; head++ {
		fn(r.cqes[head&r.cqMask])
	}
	atomic.StoreUint32(r.cqHead, head)
}

var ne = binary.NativeEndian

// prepURingCmd fills s as an IORING_OP_URING_CMD to the FUSE device fd:
// struct fuse_uring_cmd_req in the command area at byte 48.
func prepURingCmd(s []byte, fd int, op uint32, iov unsafe.Pointer, nIov uint32, tag, commitID uint64, qid uint16) {
	s[0] = ioringOpURingCmd
	ne.PutUint32(s[4:], uint32(fd))
	ne.PutUint32(s[8:], op)
	ne.PutUint64(s[16:], uint64(uintptr(iov)))
	ne.PutUint32(s[24:], nIov)
	ne.PutUint64(s[32:], tag)
	ne.PutUint64(s[56:], commitID)
	ne.PutUint16(s[64:], qid)
}

// prepRead fills s as an IORING_OP_READ of len(buf) bytes from fd.
func prepRead(s []byte, fd int, buf []byte, tag uint64) {
	s[0] = ioringOpRead
	ne.PutUint32(s[4:], uint32(fd))
	ne.PutUint64(s[8:], ^uint64(0)) // the file's position: an eventfd has none
	ne.PutUint64(s[16:], uint64(uintptr(unsafe.Pointer(&buf[0]))))
	ne.PutUint32(s[24:], uint32(len(buf)))
	ne.PutUint64(s[32:], tag)
}
