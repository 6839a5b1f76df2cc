package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Help reads like the docs' CLI reference; completions print for each
// shell. In process (run is main's all): help reads no config and calls
// no API, so it needs neither a froogd nor the built binary.
func TestCLIHelp(t *testing.T) {
	t.Parallel()
	froog := func(args ...string) (stdout, stderr string, code int) {
		var o, e bytes.Buffer
		code = run(context.Background(), args, strings.NewReader(""), &o, &e)
		return o.String(), e.String(), code
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"froog gives every agent its own Linux", "FROOG_API_KEY", "--json", "new", "exec", "host", "url-token", "desktop", "completions"}},
		{[]string{"exec", "--help"}, []string{"froog exec my-box --detach --", "--timeout", "exits 124", "--cwd", "-e, --env", "--no-stdin"}},
		{[]string{"host", "--help"}, []string{"--public", "--subdomain", "--title", "--rm"}},
		{[]string{"port", "--help"}, []string{"froog port open my-box 27015/udp", "close", "list", "IPv6"}},
		{[]string{"new", "--help"}, []string{"--os", "--max-lifetime", "--delete-after", "--no-snapshots", "--no-auto-stop", "--host"}},
		{[]string{"stop", "--help"}, []string{"--no-wait", "--status"}},
		{[]string{"status", "--help"}, []string{"--check", "froog info NAME"}},
		{[]string{"start", "--help"}, []string{"--size", "--ttl", "-e, --env", "--no-environment", "--environment "}},
		{[]string{"fork", "--help"}, []string{"NAME@latest", "--count", "--size", "--ttl", "-e, --env", "--no-snapshots"}},
		{[]string{"snapshot", "--help"}, []string{"--name", "--delete ", "--delete-auto"}},
		{[]string{"restore", "--help"}, []string{"NAME@latest"}},
		{[]string{"delete", "--help"}, []string{"saved snapshots stay", "-y, --yes"}},
		{[]string{"url-token", "--help"}, []string{"froog url-token create my-box 3000 --ttl 2h --label alice", "revoke"}},
		{[]string{"inbox", "--help"}, []string{"froog inbox redeliver my-box 3000 --failed", "list", "purge"}},
		{[]string{"webhooks", "--help"}, []string{"froog webhooks add https://example.com/froog --name prod", "deliveries", "rotate", "sandbox.recovered"}},
		{[]string{"webhooks", "update", "--help"}, []string{"--url", "--name", "--event", "--all-events", "--enable", "--disable"}},
		{[]string{"completions", "bash"}, []string{"bash completion"}},
		{[]string{"completions", "zsh"}, []string{"#compdef froog"}},
		{[]string{"completions", "fish"}, []string{"complete -c froog"}},
	} {
		out, errOut, code := froog(tc.args...)
		if code != 0 || errOut != "" {
			t.Fatalf("froog %s: exit %d: %q", strings.Join(tc.args, " "), code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("froog %s lacks %q", strings.Join(tc.args, " "), w)
			}
		}
	}
	if _, errOut, code := froog("completions", "tcsh"); code != 1 || !strings.Contains(errOut, "tcsh") {
		t.Errorf("completions tcsh: exit %d: %s", code, errOut)
	}
}
