package api

import "net/http"

// route is one endpoint. The OpenAPI document must describe exactly these
// (a test checks it).
type route struct {
	Method  string
	Pattern string
	// Action is the key action the route needs; "" when the handler
	// decides (or Public).
	Action string
	Public bool // no API key needed
	handle func(*Server, http.ResponseWriter, *http.Request) error
}

var routes = []route{
	{Method: "GET", Pattern: "/v1/openapi.json", Public: true, handle: (*Server).openAPI},

	{Method: "POST", Pattern: "/v1/sandboxes", Action: "sandbox.create", handle: (*Server).createSandbox},
	{Method: "GET", Pattern: "/v1/sandboxes", Action: "sandbox.read", handle: (*Server).listSandboxes},
	{Method: "GET", Pattern: "/v1/sandboxes/{name}", Action: "sandbox.read", handle: (*Server).getSandbox},
	{Method: "PATCH", Pattern: "/v1/sandboxes/{name}", Action: "sandbox.update", handle: (*Server).patchSandbox},
	{Method: "DELETE", Pattern: "/v1/sandboxes/{name}", handle: (*Server).deleteSandbox},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/start", Action: "sandbox.resume", handle: (*Server).startSandbox},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/stop", Action: "sandbox.stop", handle: (*Server).stopSandbox},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/touch", Action: "sandbox.update", handle: (*Server).touchSandbox},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/fork", Action: "sandbox.fork", handle: (*Server).forkSandbox},
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/ssh", Action: "ssh", handle: (*Server).sandboxSSH},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/desktop", Action: "desktop", handle: (*Server).createDesktopLink},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/browser", Action: "desktop", handle: (*Server).createBrowserLink},
	{Method: "GET", Pattern: "/v1/stops/{id}", Action: "sandbox.read", handle: (*Server).getStop},

	{Method: "GET", Pattern: "/v1/sandboxes/{name}/snapshots", Action: "snapshot.read", handle: (*Server).listSandboxSnapshots},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/snapshots", Action: "snapshot.write", handle: (*Server).saveSnapshot},
	{Method: "DELETE", Pattern: "/v1/sandboxes/{name}/snapshots", Action: "snapshot.write", handle: (*Server).deleteAutoSnapshots},
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/snapshots/{snap}", Action: "snapshot.read", handle: (*Server).getSandboxSnapshot},
	{Method: "DELETE", Pattern: "/v1/sandboxes/{name}/snapshots/{snap}", Action: "snapshot.write", handle: (*Server).deleteSandboxSnapshot},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/restore", Action: "snapshot.write", handle: (*Server).restoreSandbox},
	{Method: "GET", Pattern: "/v1/saved-snapshots", Action: "snapshot.read", handle: (*Server).listSaved},
	{Method: "GET", Pattern: "/v1/saved-snapshots/{name}", Action: "snapshot.read", handle: (*Server).getSaved},
	{Method: "DELETE", Pattern: "/v1/saved-snapshots/{name}", Action: "snapshot.write", handle: (*Server).deleteSaved},
	{Method: "GET", Pattern: "/v1/snapshots", Action: "snapshot.read", handle: (*Server).listAllSnapshots},

	{Method: "GET", Pattern: "/v1/sandboxes/{name}/urls", Action: "sandbox.read", handle: (*Server).listURLs},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/urls", Action: "host", handle: (*Server).putURL},
	{Method: "PATCH", Pattern: "/v1/sandboxes/{name}/urls/{port}", Action: "host", handle: (*Server).patchURL},
	{Method: "DELETE", Pattern: "/v1/sandboxes/{name}/urls/{port}", Action: "host", handle: (*Server).deleteURL},
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/urls/{port}/tokens", Action: "sandbox.read", handle: (*Server).listURLTokens},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/urls/{port}/tokens", Action: "host", handle: (*Server).createURLToken},
	{Method: "DELETE", Pattern: "/v1/sandboxes/{name}/urls/{port}/tokens/{id}", Action: "host", handle: (*Server).revokeURLToken},
	// A URL's webhook inbox (inbox.go).
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/urls/{port}/deliveries", Action: "sandbox.read", handle: (*Server).listDeliveries},
	{Method: "DELETE", Pattern: "/v1/sandboxes/{name}/urls/{port}/deliveries", Action: "host", handle: (*Server).purgeDeliveries},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/urls/{port}/deliveries/{id}/redeliver", Action: "host", handle: (*Server).redeliver},
	// A URL's recent traffic, from the edge's request ring (traffic.go).
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/urls/{port}/requests", Action: "sandbox.read", handle: (*Server).listRequests},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/urls/{port}/requests/{id}/replay", Action: "host", handle: (*Server).replayRequest},

	// Open ports on the sandbox's IPv6 address (ports.go).
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/ports", Action: "sandbox.read", handle: (*Server).listPorts},
	{Method: "PUT", Pattern: "/v1/sandboxes/{name}/ports", Action: "sandbox.update", handle: (*Server).putPorts},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/ports", Action: "sandbox.update", handle: (*Server).openPort},
	{Method: "DELETE", Pattern: "/v1/sandboxes/{name}/ports/{port}/{protocol}", Action: "sandbox.update", handle: (*Server).closePort},

	{Method: "POST", Pattern: "/v1/sandboxes/{name}/exec", Action: "exec", handle: (*Server).exec},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/wait", Action: "sandbox.read", handle: (*Server).wait},
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/jobs", Action: "sandbox.read", handle: (*Server).listJobs},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/jobs", Action: "exec", handle: (*Server).startJob},
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/jobs/{id}", Action: "sandbox.read", handle: (*Server).getJob},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/jobs/{id}/stop", Action: "exec", handle: (*Server).stopJob},
	// The command history (history.go): store reads, also while stopped.
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/command-history", Action: "sandbox.read", handle: (*Server).listHistory},
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/command-history/{id}", Action: "sandbox.read", handle: (*Server).getHistory},
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/command-history/{id}/logs", Action: "sandbox.read", handle: (*Server).historyLogs},
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/metrics", Action: "sandbox.read", handle: (*Server).getMetrics},
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/processes", Action: "sandbox.read", handle: (*Server).getProcesses},

	{Method: "GET", Pattern: "/v1/sandboxes/{name}/files", Action: "file.read", handle: (*Server).getFiles},
	{Method: "DELETE", Pattern: "/v1/sandboxes/{name}/files", Action: "file.write", handle: (*Server).deleteFiles},
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/files/content", Action: "file.read", handle: (*Server).getFileContent},
	{Method: "PUT", Pattern: "/v1/sandboxes/{name}/files/content", Action: "file.write", handle: (*Server).putFileContent},
	{Method: "PUT", Pattern: "/v1/sandboxes/{name}/files/archive", Action: "file.write", handle: (*Server).putArchive},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/files/move", Action: "file.write", handle: (*Server).moveFiles},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/files/mkdir", Action: "file.write", handle: (*Server).mkdirFiles},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/files/permissions", Action: "file.write", handle: (*Server).chmodFiles},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/files/download-url", Action: "file.read", handle: (*Server).createDownloadURL},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/files/upload-url", Action: "file.write", handle: (*Server).createUploadURL},
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/files/search", Action: "file.read", handle: (*Server).searchFiles},
	{Method: "GET", Pattern: "/v1/sandboxes/{name}/files/find", Action: "file.read", handle: (*Server).findFiles},
	{Method: "POST", Pattern: "/v1/sandboxes/{name}/files/replace", Action: "file.write", handle: (*Server).replaceFiles},
	// Signed links: the token in the query is the authority (files_links.go).
	{Method: "GET", Pattern: "/v1/files/download", Public: true, handle: (*Server).linkDownload},
	{Method: "PUT", Pattern: "/v1/files/upload", Public: true, handle: (*Server).linkUpload},

	{Method: "POST", Pattern: "/v1/wall", Action: "desktop", handle: (*Server).createWallLink},

	{Method: "GET", Pattern: "/v1/ssh-keys", Action: "account.read", handle: (*Server).listSSHKeys},
	{Method: "POST", Pattern: "/v1/ssh-keys", Action: "account.admin", handle: (*Server).addSSHKey},
	{Method: "DELETE", Pattern: "/v1/ssh-keys/{id}", Action: "account.admin", handle: (*Server).deleteSSHKey},

	{Method: "GET", Pattern: "/v1/limits", Action: "account.read", handle: (*Server).getLimits},

	// The account's environment (environment.go).
	{Method: "GET", Pattern: "/v1/env", Action: "environment.read", handle: (*Server).listEnv},
	{Method: "PUT", Pattern: "/v1/env/{name}", Action: "environment.write", handle: (*Server).putEnv},
	{Method: "DELETE", Pattern: "/v1/env/{name}", Action: "environment.write", handle: (*Server).deleteEnv},
	{Method: "GET", Pattern: "/v1/environment", Action: "environment.read", handle: (*Server).getEnvironment},
	{Method: "PATCH", Pattern: "/v1/environment", Action: "environment.write", handle: (*Server).patchEnvironment},
	{Method: "PUT", Pattern: "/v1/environment/files", Action: "environment.write", handle: (*Server).putEnvironmentFile},
	{Method: "DELETE", Pattern: "/v1/environment/files", Action: "environment.write", handle: (*Server).deleteEnvironmentFile},

	// API keys (apikeys.go): a key limited to some sandboxes sees none,
	// and a key makes or rotates none with more than its own scope.
	{Method: "GET", Pattern: "/v1/api-keys", Action: "account.admin", handle: (*Server).listAPIKeys},
	{Method: "POST", Pattern: "/v1/api-keys", Action: "account.admin", handle: (*Server).createAPIKey},
	{Method: "DELETE", Pattern: "/v1/api-keys/{id}", Action: "account.admin", handle: (*Server).revokeAPIKey},
	{Method: "POST", Pattern: "/v1/api-keys/{id}/rotate", Action: "account.admin", handle: (*Server).rotateAPIKey},

	{Method: "GET", Pattern: "/v1/audit", Action: "account.admin", handle: (*Server).listAudit},

	// Webhooks for sandbox events (webhooks.go): account-wide admin keys.
	{Method: "GET", Pattern: "/v1/webhooks", Action: "account.admin", handle: (*Server).listWebhooks},
	{Method: "POST", Pattern: "/v1/webhooks", Action: "account.admin", handle: (*Server).createWebhook},
	{Method: "GET", Pattern: "/v1/webhooks/{id}", Action: "account.admin", handle: (*Server).getWebhook},
	{Method: "PATCH", Pattern: "/v1/webhooks/{id}", Action: "account.admin", handle: (*Server).patchWebhook},
	{Method: "DELETE", Pattern: "/v1/webhooks/{id}", Action: "account.admin", handle: (*Server).deleteWebhook},
	{Method: "GET", Pattern: "/v1/webhooks/{id}/deliveries", Action: "account.admin", handle: (*Server).listWebhookDeliveries},
	{Method: "POST", Pattern: "/v1/webhooks/{id}/rotate", Action: "account.admin", handle: (*Server).rotateWebhook},
	{Method: "POST", Pattern: "/v1/webhooks/{id}/test", Action: "account.admin", handle: (*Server).testWebhook},
}

// Routes lists "METHOD pattern" for every route (for tests and docs).
func Routes() []string {
	out := make([]string, len(routes))
	for i, rt := range routes {
		out[i] = rt.Method + " " + rt.Pattern
	}
	return out
}
