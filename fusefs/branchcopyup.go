package fusefs

import (
	"errors"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// copyUp gives key a file of its own in the upper directory, with the
// bytes it shows (none if empty is set: the caller truncates it anyway).
// Whole files: by reflink (FICLONE) where the filesystems allow it, else
// copy_file_range, else read and write. The copy keeps the number the
// path had in the view.
func (v *BranchView) copyUp(key string, empty bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	var st unix.Stat_t
	if lstatBeneath(v.upper, key, &st) == nil {
		return nil
	}
	src, err := v.resolve(key)
	if err != nil {
		return err
	}
	if err := v.upperParents(key); err != nil {
		return err
	}
	fi, err := src.info()
	if err != nil {
		return err
	}
	up, err := atBeneath(v.upper, key)
	if err != nil {
		return err
	}
	defer up.close()
	if err := copyUpAt(src, up, fi, empty); err != nil {
		return err
	}
	if err := unix.Fstatat(up.dir, up.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	v.number(key, true, &st)
	return nil
}

// copyUpAt makes up a copy of src, which is fi.
func copyUpAt(src source, up at, fi os.FileInfo, empty bool) error {
	switch {
	case src.dir || fi.IsDir():
		if err := unix.Mkdirat(up.dir, up.name, uint32(fi.Mode().Perm())); err != nil {
			return err
		}
		return keepOwner(up, fi)
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := readlinkBeneath(src.root, src.rel)
		if err != nil {
			return err
		}
		return unix.Symlinkat(target, up.dir, up.name)
	}
	if err := copyFile(src, up, fi, empty); err != nil {
		return err
	}
	if src.owner == nil {
		return keepOwner(up, fi)
	}
	if err := unix.Fchownat(up.dir, up.name, int(src.owner.Uid), int(src.owner.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	return unix.Fchmodat(up.dir, up.name, uint32(src.owner.Perm.Perm()), 0)
}

// upperParents makes the directories above key in the upper directory,
// with the permission bits they show.
func (v *BranchView) upperParents(key string) error {
	dir := parentKey(key)
	if dir == "." {
		return nil
	}
	var st unix.Stat_t
	if lstatBeneath(v.upper, dir, &st) == nil {
		return nil
	}
	if err := v.upperParents(dir); err != nil {
		return err
	}
	var fi os.FileInfo
	if src, err := v.resolve(dir); err == nil && !src.dir {
		if fi, err = src.info(); err != nil || !fi.IsDir() {
			fi = nil
		}
	}
	up, err := atBeneath(v.upper, dir)
	if err != nil {
		return err
	}
	defer up.close()
	if fi == nil {
		return unix.Mkdirat(up.dir, up.name, 0o755)
	}
	if err := unix.Mkdirat(up.dir, up.name, uint32(fi.Mode().Perm())); err != nil {
		return err
	}
	return keepOwner(up, fi)
}

// copyUpSuffix names a copy being made beside the file it becomes.
const copyUpSuffix = ".dshfs-copyup"

// copyFile copies src to a temporary file beside dst, then renames it in:
// a copy cut short never shows as the branch's file.
func copyFile(src source, dst at, fi os.FileInfo, empty bool) error {
	tmp := dst.name
	if len(tmp) > 255-len(copyUpSuffix) { // NAME_MAX: copy-ups are one at a time
		tmp = tmp[:255-len(copyUpSuffix)]
	}
	tmp += copyUpSuffix
	fd, err := unix.Openat(dst.dir, tmp, unix.O_CREAT|unix.O_TRUNC|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(fi.Mode().Perm()))
	if err != nil {
		return &os.PathError{Op: "copy up", Path: src.rel, Err: err}
	}
	out := os.NewFile(uintptr(fd), tmp)
	if !empty {
		err = cloneInto(out, src, fi)
	}
	if err == nil {
		err = out.Chmod(fi.Mode().Perm())
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && !empty {
		mt := unix.NsecToTimespec(fi.ModTime().UnixNano())
		err = unix.UtimesNanoAt(dst.dir, tmp, []unix.Timespec{mt, mt}, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err == nil {
		err = unix.Renameat(dst.dir, tmp, dst.dir, dst.name)
	}
	if err != nil {
		unix.Unlinkat(dst.dir, tmp, 0)
	}
	return err
}

// cloneInto fills out with src's bytes: FICLONE, else copy_file_range,
// else a copy through memory. The source is opened following no symlink
// below its layer and must be the regular file seen as fi.
func cloneInto(out *os.File, src source, fi os.FileInfo) error {
	in, err := openSame(src, fi)
	if err != nil {
		return err
	}
	defer in.Close()
	size := fi.Size()
	if fileClone(int(out.Fd()), int(in.Fd())) == nil {
		return nil
	}
	for done := int64(0); done < size; {
		n, err := copyFileRange(int(in.Fd()), done, int(out.Fd()), done, int(size-done), 0)
		if err != nil || n == 0 {
			if done == 0 && (errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EINVAL)) {
				break
			}
			if err != nil {
				return err
			}
			return nil
		}
		done += int64(n)
		if done >= size {
			return nil
		}
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := out.Truncate(0); err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return err
}

// openSame opens src for reading if it is still the regular file fi (the
// same inode): a file swapped for another, or for a link, since the view
// looked is not copied.
func openSame(src source, fi os.FileInfo) (*os.File, error) {
	in, err := openBeneath(src.root, src.rel, syscall.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	got, err := in.Stat()
	if err == nil && (!got.Mode().IsRegular() || !os.SameFile(got, fi)) {
		err = &os.PathError{Op: "copy up", Path: src.rel, Err: errNotRegular}
	}
	if err != nil {
		in.Close()
		return nil, err
	}
	return in, nil
}

// keepOwner gives a copied-up file or directory the owner, group and
// permission bits (setgid and sticky too, not setuid) of what it copies.
// A daemon that is not root keeps what it can: its own files' bits.
func keepOwner(up at, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if err := unix.Fchownat(up.dir, up.name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil && os.Geteuid() == 0 {
		return err
	}
	return unix.Fchmodat(up.dir, up.name, uint32(st.Mode&(unix.S_ISGID|unix.S_ISVTX|0o777)), 0)
}
