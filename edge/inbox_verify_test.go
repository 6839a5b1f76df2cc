package edge

import (
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	old := strconv.FormatInt(now.Add(-verifyTolerance-time.Second).Unix(), 10)
	body := []byte(`{"id":"evt_1"}`)
	hexMAC := func(key string, parts ...string) string {
		var bs [][]byte
		for _, p := range parts {
			bs = append(bs, []byte(p))
		}
		return hex.EncodeToString(mac(key, bs...))
	}
	stdKey := []byte("standard webhooks key")
	stdSecret := "whsec_" + base64.StdEncoding.EncodeToString(stdKey)
	stdSig := func(id, ts string) string {
		return "v1," + base64.StdEncoding.EncodeToString(mac(string(stdKey), []byte(id+"."+ts+"."), body))
	}
	tests := []struct {
		name, provider, secret string
		headers                map[string]string
		want                   error
	}{
		{"github", ProviderGitHub, "s", map[string]string{"X-Hub-Signature-256": "sha256=" + hexMAC("s", string(body))}, nil},
		{"github wrong secret", ProviderGitHub, "t", map[string]string{"X-Hub-Signature-256": "sha256=" + hexMAC("s", string(body))}, errBadSignature},
		{"github sha1 only", ProviderGitHub, "s", map[string]string{"X-Hub-Signature": "sha1=00"}, errNoSignature},
		{"github not hex", ProviderGitHub, "s", map[string]string{"X-Hub-Signature-256": "sha256=zz"}, errBadSignature},
		{"stripe", ProviderStripe, "whsec_x", map[string]string{"Stripe-Signature": "t=" + ts + ",v1=" + hexMAC("whsec_x", ts+".", string(body)) + ",v0=00"}, nil},
		{"stripe second v1", ProviderStripe, "whsec_x", map[string]string{"Stripe-Signature": "t=" + ts + ",v1=00,v1=" + hexMAC("whsec_x", ts+".", string(body))}, nil},
		{"stripe stale", ProviderStripe, "whsec_x", map[string]string{"Stripe-Signature": "t=" + old + ",v1=" + hexMAC("whsec_x", old+".", string(body))}, errStale},
		{"stripe no time", ProviderStripe, "whsec_x", map[string]string{"Stripe-Signature": "v1=" + hexMAC("whsec_x", ts+".", string(body))}, errNoSignature},
		{"slack", ProviderSlack, "sl", map[string]string{"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": "v0=" + hexMAC("sl", "v0:"+ts+":", string(body))}, nil},
		{"slack stale", ProviderSlack, "sl", map[string]string{"X-Slack-Request-Timestamp": old, "X-Slack-Signature": "v0=" + hexMAC("sl", "v0:"+old+":", string(body))}, errStale},
		{"slack time changed", ProviderSlack, "sl", map[string]string{"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": "v0=" + hexMAC("sl", "v0:"+old+":", string(body))}, errBadSignature},
		{"standard", ProviderStandard, stdSecret, map[string]string{"webhook-id": "msg_1", "webhook-timestamp": ts, "webhook-signature": "v1,AAAA " + stdSig("msg_1", ts)}, nil},
		{"standard other id", ProviderStandard, stdSecret, map[string]string{"webhook-id": "msg_2", "webhook-timestamp": ts, "webhook-signature": stdSig("msg_1", ts)}, errBadSignature},
		{"standard stale", ProviderStandard, stdSecret, map[string]string{"webhook-id": "msg_1", "webhook-timestamp": old, "webhook-signature": stdSig("msg_1", old)}, errStale},
		{"unknown provider", "gitlab", "s", nil, errBadProvider},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			get := func(n string) string { return tt.headers[n] }
			if got := verify(tt.provider, tt.secret, get, body, now); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// FuzzVerify: whatever the headers, verify never panics, and never
// passes a signature made without the secret.
func FuzzVerify(f *testing.F) {
	f.Add("stripe", "t=1800000000,v1=00", "1800000000", "v1,AAAA", []byte("{}"))
	f.Add("standard", "", "1800000000", "v1,AAAA v1,", []byte(""))
	f.Add("slack", "v0=", "18e8", "", []byte("x"))
	f.Add("github", "sha256=", "", "", []byte("x"))
	f.Fuzz(func(t *testing.T, provider, sig, ts, std string, body []byte) {
		hs := map[string]string{"Stripe-Signature": sig, "X-Hub-Signature-256": sig, "X-Slack-Signature": sig,
			"X-Slack-Request-Timestamp": ts, "webhook-id": "msg", "webhook-timestamp": ts, "webhook-signature": std}
		get := func(n string) string { return hs[n] }
		if verify(provider, "whsec_c2VjcmV0", get, body, time.Unix(1_800_000_000, 0)) == nil {
			t.Fatalf("a guessed signature passed: %q %q %q %q", provider, sig, ts, std)
		}
	})
}
