package toolapi

import (
	"strconv"
	"strings"

	"github.com/dshfs/dshfs/policy"
)

// Limits on what one request may carry. They are checked before anything
// is read or changed, so a call that could not be recorded in full is
// refused instead of half done; the OpenAPI document and the README state
// them.
const (
	// MaxActorBytes bounds an actor's name: observations are keyed by it.
	MaxActorBytes = policy.MaxActorBytes
	// MaxPathBytes bounds cwd and file_path: the kernel's PATH_MAX.
	MaxPathBytes = 4096
)

// CheckActor refuses an actor name the index cannot key observations by.
func CheckActor(actor string) error {
	switch {
	case len(actor) > MaxActorBytes:
		return argError("actor must be at most " + strconv.Itoa(MaxActorBytes) + " bytes")
	case strings.IndexByte(actor, 0) >= 0:
		return argError("actor must not contain a NUL byte")
	}
	return nil
}

// checkPathLength refuses a path argument longer than any the kernel takes.
func checkPathLength(name, p string) error {
	if len(p) > MaxPathBytes {
		return argError(name + " must be at most " + strconv.Itoa(MaxPathBytes) + " bytes")
	}
	return nil
}

// checkRequest applies the limits to what every call carries.
func checkRequest(req Request) error {
	if err := CheckActor(req.Actor); err != nil {
		return err
	}
	return checkPathLength("cwd", req.Cwd)
}
