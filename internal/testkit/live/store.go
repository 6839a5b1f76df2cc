package live

import (
	"testing"

	"froog.tech/froog/store/embedded"
)

// EmbeddedStore is an embedded store in a temporary folder, closed when
// the test ends. (Postgres for a test: store/pg/pgtest.)
func EmbeddedStore(tb testing.TB) *embedded.Store {
	tb.Helper()
	st, err := embedded.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}
