package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"froog.tech/froog/api/contract"
)

// The OpenAPI document is the contract: every /v1 answer an end-to-end
// test gets through http.DefaultTransport (client.call, and the tests
// that use http.DefaultClient or http.Get) is checked against it, and one
// that breaks it (a field, status or header the document does not name,
// a body that does not match its schema, a 405 without its Allow) fails
// the request where it was made, and the run at its end (a violation in
// a test that swallowed the error still counts).
var contractCheck *contract.Transport

// checkContract puts the document's check in front of
// http.DefaultTransport; TestMain calls it before the tests run.
func checkContract() error {
	c, err := contract.Load()
	if err != nil {
		return err
	}
	contractCheck = &contract.Transport{Checker: c, Next: http.DefaultTransport}
	http.DefaultTransport = contractCheck
	return nil
}

// contractBroken reports the answers that broke the contract during the
// run, and whether there were any.
func contractBroken() bool {
	v := contractCheck.Violations()
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "contract: %d /v1 answers checked against the OpenAPI document\n", contractCheck.Checked())
	}
	for _, s := range v {
		fmt.Fprintf(os.Stderr, "contract: %s\n", s)
	}
	if len(v) > 0 {
		fmt.Fprintf(os.Stderr, "%d answers broke the OpenAPI document (api/openapi.json)\n", len(v))
	}
	return len(v) > 0
}
