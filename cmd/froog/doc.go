// Command froog is the CLI of froog's docs, on the Go SDK (package
// froog.tech/froog/froog): every call it makes is one of the SDK's
// generated ones. It holds no logic beyond flags, output and exit codes,
// and imports nothing of froog's but the SDK (imports_test.go).
//
// It reads FROOG_API_KEY and FROOG_API_URL, which override
// ~/.config/froog/config.json (froog login writes it). Exit codes: 0, 1
// for an error (the API's status, code, message and request id on
// stderr), the command's own for exec and logs -f, 124 for exec past its
// --timeout.
//
// Files by concern: main.go (the root command, --json output, exit
// codes), config.go (login, logout, status, the config file, durations
// and KEY=VALUE flags), sandboxes.go (new, list, info, start, stop,
// delete, fork, restore), snapshots.go (snapshot, snapshots), exec.go
// (exec, jobs, logs, kill, wait), metrics.go (metrics, ps), history.go
// (history), files.go (push, scp, ssh), urls.go (host, url-token),
// ports.go (port), inbox.go (inbox),
// views.go (desktop, browser, wall), env.go (env, environment),
// webhooks.go (webhooks) and account.go (api-key, audit, limits,
// completions). Its tests here need
// no froogd; the end-to-end ones, which run the froog binary against
// froogd dev, are e2e's TestCLI… (e2e/cli_test.go and beside it).
package main
