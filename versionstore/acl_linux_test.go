package versionstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// aclOf encodes a POSIX ACL as Linux stores it in system.posix_acl_*
// (version 2, little-endian): user::rw-, user:uid:perm, group::r--,
// mask::r--, other::r--.
func aclOf(uid uint32, perm uint16) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint32(2))
	const undefined = ^uint32(0)
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{0x01, 6, undefined}, {0x02, perm, uid}, {0x04, 4, undefined}, {0x10, 4, undefined}, {0x20, 4, undefined}} {
		binary.Write(&b, binary.LittleEndian, e)
	}
	return b.Bytes()
}

// xattrOf is attribute attr of p, nil if it has none.
func xattrOf(t *testing.T, p, attr string) []byte {
	t.Helper()
	b, err := lgetxattrAll(p, attr)
	if errors.Is(err, unix.ENODATA) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A tool's write or edit, published by a temp file renamed over the file,
// keeps the file's access ACL: the ACL denying nobody was dropped with the
// replaced inode. A file without one gets none, even in a directory whose
// default ACL gives the temp file one.
func TestToolWritesKeepTheFilesACL(t *testing.T) {
	ts := openTestStore(t)
	ts.put("denied.txt", "one\n")
	ts.put("d/plain.txt", "one\n")
	deny := aclOf(65534, 0)
	err := unix.Setxattr(ts.path("denied.txt"), aclAccess, deny, 0)
	if errors.Is(err, unix.EOPNOTSUPP) {
		t.Skip("the filesystem keeps no POSIX ACLs")
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(ts.path("d"), "system.posix_acl_default", aclOf(65534, 7), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.write("denied.txt", "two\n", Intent{}); err != nil {
		t.Fatal(err)
	}
	v := ts.version("denied.txt")
	if _, err := ts.edit("denied.txt", Edit{Old: "two", New: "three"}, &v); err != nil {
		t.Fatal(err)
	}
	if got := xattrOf(t, ts.path("denied.txt"), aclAccess); !bytes.Equal(got, deny) {
		t.Errorf("ACL after a write and an edit: %x, want %x", got, deny)
	}
	if _, err := ts.write("d/plain.txt", "two\n", Intent{}); err != nil {
		t.Fatal(err)
	}
	if got := xattrOf(t, ts.path("d/plain.txt"), aclAccess); got != nil {
		t.Errorf("a file without an ACL has one after a write: %x", got)
	}
}
