//go:build froogtest

package main

import (
	"crypto/x509"
	"os"

	"froog.tech/froog/api"
)

// testWebhookCAEnv names a PEM file of certificates that the webhook
// sender trusts, for end-to-end tests whose receiver runs on loopback
// with a certificate of their own. Only test builds (the froogtest tag)
// read it; with it set the sender may also reach loopback and private
// addresses, which the SSRF rule refuses everywhere else.
const testWebhookCAEnv = "FROOG_TEST_WEBHOOK_CA"

// testWebhooks returns the webhook sender's options under
// FROOG_TEST_WEBHOOK_CA; the zero value (production's) without it.
func testWebhooks() api.WebhookOptions {
	path := os.Getenv(testWebhookCAEnv)
	if path == "" {
		return api.WebhookOptions{}
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return api.WebhookOptions{}
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	return api.WebhookOptions{RootCAs: roots, AllowPrivateTargets: true}
}
