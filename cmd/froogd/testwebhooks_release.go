//go:build !froogtest

package main

import "froog.tech/froog/api"

// testWebhooks is production's webhook sender in a release build: the
// variable that lets test builds reach a receiver on loopback
// (testwebhooks.go) is ignored, so no environment can turn the SSRF rule
// off.
func testWebhooks() api.WebhookOptions { return api.WebhookOptions{} }
