// Package e2e is froog's end-to-end suite: tests that build and run the
// real froogd binary (its roles dev, edge, api, hostctl, migrate, admin)
// against real sandboxes, Postgres, Chromium and VMs.
//
// The harness is in its test files: TestMain builds froogd and the froog
// CLI once (a test build, as shipped; FROOG_E2E_RACE=1 adds the race
// detector); startDev starts froogd dev with options (flags, a test clock,
// an account's key) and start/startCmd any other role; cli runs the froog
// CLI as its user does (a home folder of its own, no FROOG_* of the
// test's) for the TestCLI… tests (cli_test.go, cli_env_test.go,
// cli_inbox_test.go, cli_webhooks_test.go, and ports_test.go's
// TestCLIPorts); client is the API's typed caller, whose answers are
// checked against the OpenAPI document (contract_test.go); selfHosted
// prepares a Postgres store (a schema of its own) as an operator would,
// the embedded store is froogd dev's; every process's log, and every CLI
// run's stderr, is scanned for secrets when it ends (checkNoSecrets); keep
// puts artefacts (screenshots) in .artefacts/ or $FROOG_ARTEFACTS.
//
// Every test starts with t.Parallel() unless it must run alone, and then
// says why in one line. The VM tests are named TestQEMU… so that make
// test runs them in its VM phase. Nothing imports this package.
package e2e
