package fusefs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// copyUp gives key a file of its own in the upper directory, with the
// bytes it shows (none if empty is set: the caller truncates it anyway).
// Whole files: by reflink (FICLONE) where the filesystems allow it, else
// copy_file_range, else read and write.
func (v *BranchView) copyUp(key string, empty bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	up := filepath.Join(v.upper, key)
	if _, err := os.Lstat(up); err == nil {
		return nil
	}
	src, err := v.resolve(key)
	if err != nil {
		return err
	}
	if err := v.upperParents(key); err != nil {
		return err
	}
	fi, err := os.Lstat(src.path)
	if err != nil {
		return err
	}
	switch {
	case src.dir || fi.IsDir():
		if err := os.Mkdir(up, fi.Mode().Perm()); err != nil {
			return err
		}
		return keepOwner(up, fi)
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := readlinkBeneath(src.root, src.rel)
		if err != nil {
			return err
		}
		return os.Symlink(target, up)
	}
	if err := copyFile(src, up, fi, empty); err != nil {
		return err
	}
	if src.owner == nil {
		return keepOwner(up, fi)
	}
	if err := os.Chmod(up, src.owner.Perm.Perm()); err != nil {
		return err
	}
	return os.Lchown(up, int(src.owner.Uid), int(src.owner.Gid))
}

// upperParents makes the directories above key in the upper directory,
// with the permission bits they show.
func (v *BranchView) upperParents(key string) error {
	dir := parentKey(key)
	if dir == "." {
		return nil
	}
	if _, err := os.Lstat(filepath.Join(v.upper, dir)); err == nil {
		return nil
	}
	if err := v.upperParents(dir); err != nil {
		return err
	}
	var fi os.FileInfo
	if src, err := v.resolve(dir); err == nil && !src.dir {
		fi, _ = os.Stat(src.path)
	}
	up := filepath.Join(v.upper, dir)
	if fi == nil {
		return os.Mkdir(up, 0o755)
	}
	if err := os.Mkdir(up, fi.Mode().Perm()); err != nil {
		return err
	}
	return keepOwner(up, fi)
}

// copyFile copies src to a temporary file beside dst, then renames it in:
// a copy cut short never shows as the branch's file.
func copyFile(src source, dst string, fi os.FileInfo, empty bool) error {
	tmp := dst + ".dshfs-copyup"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return err
	}
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
		err = os.Chtimes(tmp, fi.ModTime(), fi.ModTime())
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
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
func keepOwner(up string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if err := os.Lchown(up, int(st.Uid), int(st.Gid)); err != nil && os.Geteuid() == 0 {
		return err
	}
	return os.Chmod(up, fi.Mode()&(os.ModePerm|os.ModeSetgid|os.ModeSticky))
}
