// Package names is the host-name grammar of public URLs and froog's own
// hosts, and nothing else (as Coder's appurl): a sandbox port's default
// name NAME-PORT-RAND (NewName, RandomLabel), a chosen subdomain
// (CheckSubdomain) and the names froog keeps for itself (Reserved); the
// view hosts KIND--HEX of a sandbox's desktop and browser view and an
// account's wall (the view kinds ViewDesktop, ViewBrowser and ViewWall,
// ViewLabel, ParseView); and reading a Host header's single label under
// the public domain (Label, SplitHostPort) and writing a host's address
// (HostURL).
//
// The API makes names with it, the edge and desktop read them, certs asks
// whether a name is one label under the domain. It imports nothing of
// froog's and knows nothing of HTTP.
//
//   - names.go: the grammar.
package names
