package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"froog.tech/froog/froog"
)

// Wrong arguments fail before any call, with exit 1 and a message that
// says what to give; every problem of one update is named at once. In
// process: nothing here reads the config or reaches an API, so a message
// about logging in or a connection would fail the test.
func TestWebhooksArgErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"webhooks", "add"}, []string{"give the endpoint's https:// URL"}},
		{[]string{"webhooks", "add", "https://a.example/x", "https://b.example/y"}, []string{"give the endpoint's https:// URL"}},
		{[]string{"webhooks", "add", "https://a.example/x", "--event", "sandbox.runing"}, []string{`"sandbox.runing"`, "sandbox.running, sandbox.stopped"}},
		{[]string{"webhooks", "add", "https://a.example/x", "--event", "sandbox.error,stopped"}, []string{`not an event type: "stopped"`}},
		{[]string{"webhooks", "update", "wh_1", "--enable", "--disable"}, []string{"give --enable or --disable, not both"}},
		{[]string{"webhooks", "update", "wh_1"}, []string{"nothing to change"}},
		{[]string{"webhooks", "update", "wh_1", "--url", ""}, []string{"--url: give the endpoint's https:// URL"}},
		{[]string{"webhooks", "update", "wh_1", "--event", "sandbox.error", "--all-events"}, []string{"--event or --all-events, not both"}},
		{[]string{"webhooks", "update", "wh_1", "--event", "nope", "--enable", "--disable"}, []string{`"nope"`, "--enable or --disable, not both"}},
		{[]string{"webhooks", "update"}, []string{"accepts 1 arg"}},
		{[]string{"webhooks", "rotate"}, []string{"accepts 1 arg"}},
		{[]string{"webhooks", "test", "wh_1", "wh_2"}, []string{"accepts 1 arg"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			var o, e bytes.Buffer
			code := run(context.Background(), tc.args, strings.NewReader(""), &o, &e)
			if code != 1 || o.Len() != 0 {
				t.Fatalf("got exit %d, stdout %q; want exit 1 and nothing printed", code, o.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(e.String(), w) {
					t.Errorf("got %q, want it to say %q", e.String(), w)
				}
			}
		})
	}
}

func TestParseEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{nil, nil},
		{[]string{"sandbox.error"}, []string{"sandbox.error"}},
		{[]string{"sandbox.error", "sandbox.stopped"}, []string{"sandbox.error", "sandbox.stopped"}},
		{[]string{"sandbox.error, sandbox.stopped", "sandbox.error"}, []string{"sandbox.error", "sandbox.stopped"}},
	} {
		got, err := parseEvents(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseEvents(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range [][]string{{"ping"}, {""}, {"sandbox.error,"}, {"SANDBOX.ERROR"}} {
		if got, err := parseEvents(in); err == nil {
			t.Errorf("parseEvents(%q) = %v, want an error", in, got)
		}
	}
}

// The PATCH holds only what was given: --name "" removes the name,
// --disable sends enabled false, --all-events an empty list (all), not
// nothing.
func TestUpdateBody(t *testing.T) {
	t.Parallel()
	type flags struct {
		set                  []string
		url, name            string
		events               []string
		all, enable, disable bool
	}
	for _, tc := range []struct {
		f    flags
		want string
	}{
		{flags{disable: true}, `{"enabled":false}`},
		{flags{enable: true}, `{"enabled":true}`},
		{flags{set: []string{"name"}}, `{"name":""}`},
		{flags{set: []string{"name"}, name: "prod"}, `{"name":"prod"}`},
		{flags{set: []string{"url"}, url: "https://b.example/h"}, `{"url":"https://b.example/h"}`},
		{flags{all: true}, `{"events":[]}`},
		{flags{events: []string{"sandbox.stopped"}, disable: true}, `{"enabled":false,"events":["sandbox.stopped"]}`},
	} {
		body, err := updateBody(func(f string) bool { return slices.Contains(tc.f.set, f) }, tc.f.url, tc.f.name, tc.f.events, tc.f.all, tc.f.enable, tc.f.disable)
		if err != nil {
			t.Errorf("%+v: %v", tc.f, err)
			continue
		}
		if b, _ := json.Marshal(body); string(b) != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.f, b, tc.want)
		}
	}
}

func TestAttemptResult(t *testing.T) {
	t.Parallel()
	code := func(n int) *int { return &n }
	text := func(s string) *string { return &s }
	for _, tc := range []struct {
		a    froog.WebhookAttempt
		want string
	}{
		{froog.WebhookAttempt{Status: "delivered", ResponseCode: code(204)}, "delivered 204"},
		{froog.WebhookAttempt{Status: "failed", ResponseCode: code(500), Error: text("answered 500")}, "failed: answered 500"},
		{froog.WebhookAttempt{Status: "failed", ResponseCode: code(502)}, "failed: answered 502"},
		{froog.WebhookAttempt{Status: "failed", Error: text("no answer within 10 s")}, "failed: no answer within 10 s"},
		{froog.WebhookAttempt{Status: "failed"}, "failed"},
	} {
		if got := attemptResult(&tc.a); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
