# Sourced by run.sh: what this harness changes in its copy of xfstests.
# Each change is checked, so a new xfstests that moved the code fails the
# build rather than running with it unpatched.

# patch_xfstests DIR: two changes to DIR/common/rc, both for FUSE mounts
# whose "device" is the backing directory they serve:
#   - the type check: a FUSE mount with a subtype shows as fuse.SUBTYPE
#     in the mount table and dshfs names its mounts (passthrough_ll does
#     not), so xfstests took fuse.dshfs for another type than FSTYP=fuse
#     and refused to run; it sees plain fuse now.
#   - unmounting: xfstests unmounts by device, and umount(8) takes a
#     directory for a mount point ("not mounted"); FUSE mounts are
#     unmounted by their mount point, as tmpfs ones already are.
patch_xfstests() {
	local rc=$1/common/rc
	sed -i -e 's|-e .s/fuse.glusterfs/glusterfs/.|& -e "s/^fuse\\.dshfs$/fuse/"|' \
		-e '/^_scratch_unmount()/,/^}/ s/^\ttmpfs)$/\ttmpfs|fuse)/' \
		-e '/^_test_unmount()/,/^}/ s/^\tif \[ "$FSTYP" == "overlay" \]; then$/\tif [ "$FSTYP" == "fuse" ]; then\n\t\t_unmount $TEST_DIR\n\telif [ "$FSTYP" == "overlay" ]; then/' \
		"$rc"
	grep -qF 's/^fuse\.dshfs$/fuse/' "$rc" && grep -q '^	tmpfs|fuse)$' "$rc" &&
		grep -q '^		_unmount \$TEST_DIR$' "$rc" || {
		echo "xfstests: could not patch common/rc for FUSE mounts (see $here/patch.sh)" >&2
		exit 2
	}
}
