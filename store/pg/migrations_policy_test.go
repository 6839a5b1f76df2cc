package pg_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The migration policy (docs/operating/upgrades.md): forward-compatible, expand then
// contract. A migration only adds — tables, columns that are nullable or
// have a default, indexes — so that the previous release's binaries run
// against the new schema during a rolling upgrade. A statement that takes
// something away or changes it under a running binary is refused unless
// a comment right above it says it is the contract step and why it is
// safe: "-- contract: <the release that stopped using it>".

// breaking lists the statements that break the previous release.
var breaking = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`(?i)\bDROP\s+(TABLE|COLUMN|INDEX|CONSTRAINT|VIEW|TYPE|FUNCTION|TRIGGER|SCHEMA)\b`), "drops what the previous release may use"},
	{regexp.MustCompile(`(?i)\bALTER\s+TABLE\b.*\bDROP\b`), "drops what the previous release may use"},
	{regexp.MustCompile(`(?i)\bRENAME\b`), "renames what the previous release names"},
	{regexp.MustCompile(`(?i)\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b`), "changes a column's type under the previous release"},
	{regexp.MustCompile(`(?i)\bSET\s+NOT\s+NULL\b`), "makes the previous release's inserts fail"},
	{regexp.MustCompile(`(?i)\bTRUNCATE\b`), "empties a table the previous release uses"},
	{regexp.MustCompile(`(?i)\bADD\s+(COLUMN\s+)?\S+\s+[^,;]*\bNOT\s+NULL\b`), "adds a NOT NULL column the previous release does not fill"},
}

// violations returns what in sql breaks the policy, statement by
// statement; a NOT NULL column with a DEFAULT is fine.
func violations(sql string) []string {
	var out []string
	contract := false
	var stmt strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") {
			if strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(trimmed, "--")), "contract:") {
				contract = true
			}
			continue
		}
		stmt.WriteString(line + "\n")
		if !strings.HasSuffix(trimmed, ";") {
			continue
		}
		s := strings.Join(strings.Fields(stmt.String()), " ")
		stmt.Reset()
		if !contract {
			for _, b := range breaking {
				if b.re.MatchString(s) && !(strings.Contains(b.what, "NOT NULL column") && regexp.MustCompile(`(?i)\bDEFAULT\b`).MatchString(s)) {
					out = append(out, b.what+": "+s)
				}
			}
		}
		contract = false
	}
	return out
}

func TestMigrationsOnlyAdd(t *testing.T) {
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range violations(string(b)) {
			t.Errorf("%s %s (see the migration policy in docs/operating/upgrades.md)", filepath.Base(f), v)
		}
	}
}

// The checker itself: what it lets through and what it stops.
func TestMigrationPolicyChecker(t *testing.T) {
	for _, tc := range []struct {
		sql string
		ok  bool
	}{
		{"CREATE TABLE t (id text PRIMARY KEY, doc jsonb NOT NULL);", true},
		{"ALTER TABLE t ADD COLUMN c text;", true},
		{"ALTER TABLE t ADD COLUMN c integer NOT NULL DEFAULT 0;", true},
		{"CREATE INDEX t_c ON t (c);", true},
		{"ALTER TABLE t ADD COLUMN c text NOT NULL;", false},
		{"ALTER TABLE t\n  DROP COLUMN c;", false},
		{"DROP TABLE t;", false},
		{"ALTER TABLE t RENAME COLUMN a TO b;", false},
		{"ALTER TABLE t ALTER COLUMN c TYPE bigint;", false},
		{"ALTER TABLE t ALTER COLUMN c SET NOT NULL;", false},
		{"TRUNCATE t;", false},
		{"-- contract: 0.3 stopped reading t.c\nALTER TABLE t DROP COLUMN c;", true},
		{"-- contract: only the next statement\nALTER TABLE t DROP COLUMN c;\nDROP TABLE u;", false},
	} {
		if got := len(violations(tc.sql)) == 0; got != tc.ok {
			t.Errorf("%q: allowed %v, want %v (%v)", tc.sql, got, tc.ok, violations(tc.sql))
		}
	}
}
