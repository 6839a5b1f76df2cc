// Command froogd is froog's one binary. It only wires packages together:
//
//	froogd dev                          every role in one process: embedded store, no setup
//	froogd api                          the /v1 API against Postgres
//	froogd edge                         the public-URL edge against Postgres
//	froogd hostctl                      the sandboxes of one host
//	froogd migrate                      bring the Postgres schema up to date
//	froogd admin create-account         make an account (self-hosting)
//	froogd admin api-key create         make an API key for an account
//
// Every flag has a FROOG_* environment equivalent (--api-addr is
// FROOG_API_ADDR); flags win.
package main
