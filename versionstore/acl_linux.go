package versionstore

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// aclAccess is the attribute holding a file's POSIX access ACL.
const aclAccess = "system.posix_acl_access"

// keepACL gives f, the temp file that replaces name in the directory
// dirfd, the POSIX access ACL name has, or none if it has none: the temp
// file may have been given one by its directory's default ACL. A publish
// by rename would otherwise drop the ACL of the file it replaces, and
// whom it grants or denies access. It runs after f's chmod, which would
// change the ACL's mask.
func keepACL(f *os.File, dirfd int, name string) error {
	acl, err := lgetxattrAll("/proc/self/fd/"+strconv.Itoa(dirfd)+"/"+name, aclAccess)
	switch {
	case errors.Is(err, unix.ENODATA):
		err = unix.Fremovexattr(int(f.Fd()), aclAccess)
		if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.EOPNOTSUPP) {
			return nil
		}
		return err
	case errors.Is(err, unix.EOPNOTSUPP):
		return nil // the filesystem keeps no ACLs
	case err != nil:
		return err
	}
	return unix.Fsetxattr(int(f.Fd()), aclAccess, acl, 0)
}

// lgetxattrAll reads attribute attr of p, not following a symlink.
func lgetxattrAll(p, attr string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Lgetxattr(p, attr, buf)
		if err == nil {
			return buf[:n], nil
		}
		if !errors.Is(err, unix.ERANGE) {
			return nil, err
		}
		if n, err = unix.Lgetxattr(p, attr, nil); err != nil {
			return nil, err
		}
		buf = make([]byte, n+1) // it may grow again
	}
}
