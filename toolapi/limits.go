package toolapi

import (
	"strconv"
	"strings"

	"github.com/dshfs/dshfs/policy"
)

// Limits on what one request may carry. They are checked before anything
// is read or changed, so a call that could not be recorded in full is
// refused instead of half done; the OpenAPI document and docs/security.md
// state them.
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

// MaxActorBaseBytes bounds the part of an MCP session's actor name taken
// from its client's name.
const MaxActorBaseBytes = 32

// ActorBase is the part of an MCP session's actor name taken from the
// client's name (initialize's clientInfo.name: "claude-code", "codex"),
// which the client chooses: letters, digits, '.', '_' and '-' only, any
// other run of bytes one '-', no leading or trailing punctuation, at most
// MaxActorBaseBytes, so the name is safe wherever actors are shown or
// stored (no path separator, nothing unprintable). "mcp" if nothing is left.
func ActorBase(client string) string {
	b := make([]byte, 0, MaxActorBaseBytes)
	for i := 0; i < len(client) && len(b) < MaxActorBaseBytes; i++ {
		c := client[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			b = append(b, c)
		case len(b) == 0: // no leading punctuation
		case c == '.', c == '_', c == '-':
			b = append(b, c)
		case b[len(b)-1] != '-':
			b = append(b, '-')
		}
	}
	base := strings.Trim(string(b), "-._")
	if base == "" {
		return "mcp"
	}
	return base
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
