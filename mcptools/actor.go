package mcptools

import (
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Actor is an MCP session's actor. One given up front (--actor) is fixed;
// otherwise the session's actor is named once, after its client
// (initialize's clientInfo.name), when first asked for: at initialize, or
// at a call that comes before it (then with no client name).
type Actor struct {
	once  sync.Once
	name  string
	namer func(client string) string
}

// FixedActor is a session's actor given up front.
func FixedActor(name string) *Actor {
	a := &Actor{name: name}
	a.once.Do(func() {})
	return a
}

// NamedActor is a session's actor that namer names after the client.
func NamedActor(namer func(client string) string) *Actor { return &Actor{namer: namer} }

// Name is the actor, named after client if it has no name yet.
func (a *Actor) Name(client string) string {
	a.once.Do(func() { a.name = a.namer(client) })
	return a.name
}

// ClientName is the client's name in its initialize parameters ("" if
// none). It is the client's to choose: toolapi.ActorBase makes it safe.
func ClientName(p *mcp.InitializeParams) string {
	if p == nil || p.ClientInfo == nil {
		return ""
	}
	return p.ClientInfo.Name
}
