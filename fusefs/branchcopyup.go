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
		return os.Mkdir(up, fi.Mode().Perm())
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(src.path)
		if err != nil {
			return err
		}
		return os.Symlink(target, up)
	}
	if err := copyFile(src.path, up, fi, empty); err != nil || src.owner == nil {
		return err
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
	perm := os.FileMode(0o755)
	if src, err := v.resolve(dir); err == nil && !src.dir {
		if fi, err := os.Stat(src.path); err == nil {
			perm = fi.Mode().Perm()
		}
	}
	return os.Mkdir(filepath.Join(v.upper, dir), perm)
}

// copyFile copies src to a temporary file beside dst, then renames it in:
// a copy cut short never shows as the branch's file.
func copyFile(src, dst string, fi os.FileInfo, empty bool) error {
	tmp := dst + ".dshfs-copyup"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if !empty {
		err = cloneInto(out, src, fi.Size())
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
// else a copy through memory.
func cloneInto(out *os.File, src string, size int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
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
