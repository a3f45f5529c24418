// Package unixsocket will own the HTTP/1.1 server on the daemon's Unix
// socket, its route table and wire types, and the typed Go client the CLI
// uses. It only carries toolapi calls; it never touches files itself.
//
// It is not built yet; see the design contract's "The socket API".
package unixsocket
