package main_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The 21st start in a minute, through the real binary, is refused with
// 429 limit_reached and a Retry-After that says when a start is free
// again (at most the minute); GET /v1/limits agrees. (That honouring it
// works is tested with an injected clock in package api.)
func TestStartLimitE2E(t *testing.T) {
	data := t.TempDir()
	_, m := start(t, devReady, "dev", "--data", data, "--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--rate-limit", "0")
	key, _ := os.ReadFile(filepath.Join(data, "api-key"))
	c := client{t: t, base: m[1], key: strings.TrimSpace(string(key))}
	for i := range 20 {
		name := fmt.Sprintf("s%d", i)
		c.call("POST", "/v1/sandboxes", `{"name":"`+name+`","environment":false,"snapshots":false}`, 202, nil)
		c.call("DELETE", "/v1/sandboxes/"+name, "", 202, nil) // frees its place at once, not its start
	}
	req, _ := http.NewRequest("POST", c.base+"/v1/sandboxes", strings.NewReader(`{"name":"s20"}`))
	req.Header.Set("Authorization", "Bearer "+c.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	ra, _ := strconv.Atoi(res.Header.Get("Retry-After"))
	if res.StatusCode != 429 || ra < 1 || ra > 60 || res.Header.Get("RateLimit-Policy") != "20;w=60" || res.Header.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("21st start: %d, Retry-After %q, RateLimit-Policy %q", res.StatusCode, res.Header.Get("Retry-After"), res.Header.Get("RateLimit-Policy"))
	}
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
}
