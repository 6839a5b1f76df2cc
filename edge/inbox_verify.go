package edge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Signature checks of the webhook inbox: each provider's scheme, HMAC
// SHA-256 compared in constant time, and where the scheme signs a time,
// that time within verifyTolerance of the edge's clock (a replayed
// request is refused). GitHub signs no time: its deliveries carry an id
// (X-GitHub-Delivery) the app can use to drop a repeat.

// Inbox verification providers.
const (
	ProviderGitHub   = "github"
	ProviderStripe   = "stripe"
	ProviderSlack    = "slack"
	ProviderStandard = "standard" // Standard Webhooks (webhook-id, -timestamp, -signature)
)

// verifyTolerance is how far a signed time may be from now: Stripe's and
// Slack's own libraries use five minutes.
const verifyTolerance = 5 * time.Minute

// KnownProvider reports whether p is a provider the inbox verifies.
func KnownProvider(p string) bool {
	switch p {
	case ProviderGitHub, ProviderStripe, ProviderSlack, ProviderStandard:
		return true
	}
	return false
}

var (
	errNoSignature  = errors.New("no signature header")
	errBadSignature = errors.New("signature does not match")
	errStale        = errors.New("signed time too far from now")
	errBadProvider  = errors.New("unknown provider")
)

// verify checks the signature of a request with headers h (get gives a
// header's first value, whatever its case) and body.
func verify(provider, secret string, get func(string) string, body []byte, now time.Time) error {
	switch provider {
	case ProviderGitHub:
		sig, ok := strings.CutPrefix(get("X-Hub-Signature-256"), "sha256=")
		if !ok {
			return errNoSignature
		}
		return matchHex(sig, mac(secret, body))
	case ProviderStripe:
		return verifyStripe(secret, get("Stripe-Signature"), body, now)
	case ProviderSlack:
		ts, sig := get("X-Slack-Request-Timestamp"), get("X-Slack-Signature")
		sig, ok := strings.CutPrefix(sig, "v0=")
		if ts == "" || !ok {
			return errNoSignature
		}
		if err := fresh(ts, now); err != nil {
			return err
		}
		return matchHex(sig, mac(secret, []byte("v0:"+ts+":"), body))
	case ProviderStandard:
		return verifyStandard(secret, get("webhook-id"), get("webhook-timestamp"), get("webhook-signature"), body, now)
	}
	return errBadProvider
}

// verifyStripe checks Stripe-Signature: t=TIME,v1=SIG (several v1 while
// a secret rolls; any may match) over "TIME." + body.
func verifyStripe(secret, header string, body []byte, now time.Time) error {
	var ts string
	var sigs []string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if ts == "" || len(sigs) == 0 {
		return errNoSignature
	}
	if err := fresh(ts, now); err != nil {
		return err
	}
	want := mac(secret, []byte(ts+"."), body)
	for _, sig := range sigs {
		if matchHex(sig, want) == nil {
			return nil
		}
	}
	return errBadSignature
}

// verifyStandard checks Standard Webhooks: the secret is whsec_ and the
// key in base64; webhook-signature lists "v1,BASE64" signatures, spaced,
// over "ID.TIME." + body.
func verifyStandard(secret, id, ts, header string, body []byte, now time.Time) error {
	if id == "" || ts == "" || header == "" {
		return errNoSignature
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return errBadSignature // the API refuses such a secret; never matched
	}
	if err := fresh(ts, now); err != nil {
		return err
	}
	want := mac(string(key), []byte(id+"."+ts+"."), body)
	for sig := range strings.FieldsSeq(header) {
		v, b64, ok := strings.Cut(sig, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errBadSignature
}

// mac is HMAC-SHA256 under key of the parts, in order.
func mac(key string, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, []byte(key))
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

// matchHex compares a hex signature with want in constant time.
func matchHex(sig string, want []byte) error {
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, want) {
		return errBadSignature
	}
	return nil
}

// fresh checks a signed Unix time against now.
func fresh(ts string, now time.Time) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errNoSignature
	}
	d := now.Sub(time.Unix(sec, 0))
	if d > verifyTolerance || d < -verifyTolerance {
		return errStale
	}
	return nil
}
