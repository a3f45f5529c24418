package daemon

import (
	"strconv"
	"sync"

	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/toolapi"
)

// actorNames names the actors of the MCP sessions the daemon serves after
// their clients, numbered to stay unique per session: "claude-code-1",
// "claude-code-2". A number is never given twice in the daemon's life, nor
// to an actor the policy still keeps observations of (a session of an
// earlier daemon): a new session must not inherit another's reads.
type actorNames struct {
	pol  *policy.Policy // nil: no policy, no actors kept
	mu   sync.Mutex
	used map[string]bool
}

func newActorNames(pol *policy.Policy) *actorNames {
	return &actorNames{pol: pol, used: map[string]bool{}}
}

// name is a fresh actor name for a session of client.
func (a *actorNames) name(client string) string {
	kept := map[string]bool{}
	if a.pol != nil {
		acts, _ := a.pol.Activity()
		for _, act := range acts {
			kept[act.Actor] = true
		}
	}
	base := toolapi.ActorBase(client)
	a.mu.Lock()
	defer a.mu.Unlock()
	for n := 1; ; n++ {
		name := base + "-" + strconv.Itoa(n)
		if !a.used[name] && !kept[name] {
			a.used[name] = true
			return name
		}
	}
}
