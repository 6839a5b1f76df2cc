// Package edge will serve sandboxes' public URLs: the public listeners,
// host parsing, the route cache fed by the store's change feed, token and
// cookie auth, the hold-on-start logic, the reverse proxy and websocket
// passthrough, the HTML error pages, access logs and metrics.
//
// Not built yet (its own issue). It must not import api, and it asks certs
// for certificates rather than issuing them.
package edge
