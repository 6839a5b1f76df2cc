package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The 21st start in a minute, through the real binary, is refused with
// 429 limit_reached and a Retry-After that says when a start is free
// again (at most the minute); GET /v1/limits agrees. (That honouring it
// works is tested with an injected clock in package api.) An account the
// operator made with other limits keeps to its own.
func TestStartLimitE2E(t *testing.T) {
	t.Parallel()
	var opsKey string
	c := startDev(t, devOptions{args: []string{"--rate-limit", "0"}, prepare: func(data string) string {
		opsKey = adminAccount(t, []string{"--data", data}, "--name", "ops", "--starts-per-minute", "3")
		return ""
	}}).c
	// startsThenRefused starts n sandboxes (each deleted at once, which
	// frees its place, not its start), then one more, which must be
	// refused under policy; it returns the refusal's Retry-After.
	startsThenRefused := func(c client, n int, policy string) int {
		t.Helper()
		for i := range n {
			name := fmt.Sprintf("s%d", i)
			c.call("POST", "/v1/sandboxes", `{"name":"`+name+`","environment":false,"snapshots":false}`, 202, nil)
			c.call("DELETE", "/v1/sandboxes/"+name, "", 202, nil)
		}
		req, _ := http.NewRequest("POST", c.base+"/v1/sandboxes", strings.NewReader(`{"name":"one-more"}`))
		req.Header.Set("Authorization", "Bearer "+c.key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		ra, _ := strconv.Atoi(res.Header.Get("Retry-After"))
		if res.StatusCode != 429 || ra < 1 || ra > 60 || res.Header.Get("RateLimit-Policy") != policy || res.Header.Get("RateLimit-Remaining") != "0" {
			t.Fatalf("start %d: %d, Retry-After %q, RateLimit-Policy %q; want 429 under %q", n+1, res.StatusCode,
				res.Header.Get("Retry-After"), res.Header.Get("RateLimit-Policy"), policy)
		}
		return ra
	}
	ra := startsThenRefused(c, 20, "20;w=60")
	var l struct {
		StartsPerMinute struct {
			Used, Remaining int
			RetryAfter      int `json:"retry_after"`
		} `json:"starts_per_minute"`
	}
	c.call("GET", "/v1/limits", "", 200, &l)
	if l.StartsPerMinute.Used != 20 || l.StartsPerMinute.Remaining != 0 || l.StartsPerMinute.RetryAfter < 1 || l.StartsPerMinute.RetryAfter > ra {
		t.Fatalf("limits: %+v (Retry-After %d)", l.StartsPerMinute, ra)
	}
	startsThenRefused(client{t: t, base: c.base, key: opsKey}, 3, "3;w=60")
}

// froogd admin create-account refuses a limit under 1, naming the flag.
func TestCreateAccountRefusesBadLimits(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	for _, flag := range []string{"--max-sandboxes", "--url-names-per-day", "--starts-per-minute", "--starts-per-hour", "--starts-per-day"} {
		for _, v := range []string{"0", "-1"} {
			out, err := froogdOut("admin", "create-account", "--data", data, "--name", "x", flag, v)
			if err == nil || !strings.Contains(out, flag+" must be at least 1") {
				t.Errorf("create-account %s %s: %v: %s", flag, v, err, out)
			}
		}
	}
	if ents, _ := os.ReadDir(data); len(ents) != 0 {
		t.Errorf("refused create-accounts left %d files in the data folder", len(ents))
	}
}
