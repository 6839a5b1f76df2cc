package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// The example environment files of the Debian package (/etc/froog/*.env)
// are written by `froogd env-example` from the flag definitions
// themselves, so they cannot drift from them: every flag of a role is
// there in its FROOG_* form, with its usage and default.

// serviceRoles are the roles a systemd unit runs, each with its
// configuration; their flags are what the example files document.
var serviceRoles = []struct {
	name string
	c    func() config
}{
	{"edge", func() config { return new(edgeConfig) }},
	{"api", func() config { return new(apiConfig) }},
	{"hostctl", func() config { return new(hostctlConfig) }},
	{"migrate", func() config { return new(migrateConfig) }},
}

// roleFlags lists a role's flags in the order they are declared, with
// the defaults they have when no FROOG_* variable is set.
func roleFlags(c config) []*flag.Flag {
	f := newFlags("", io.Discard)
	c.bind(f)
	var out []*flag.Flag
	f.VisitAll(func(fl *flag.Flag) { out = append(out, fl) })
	// VisitAll goes in name order; the declaration order reads better
	// but is not kept by package flag, so name order it is.
	return out
}

// perRole are flags that several roles have but that must differ between
// them on one machine.
var perRole = map[string]bool{"metrics-addr": true}

// commonFlags are the flags that two or more service roles share (but for
// perRole's): they go in froog.env, which every unit reads first.
func commonFlags() []*flag.Flag {
	seen := map[string]int{}
	var all []*flag.Flag
	for _, r := range serviceRoles {
		for _, fl := range roleFlags(r.c()) {
			if seen[fl.Name]++; seen[fl.Name] == 1 {
				all = append(all, fl)
			}
		}
	}
	var out []*flag.Flag
	for _, fl := range all {
		if seen[fl.Name] >= 2 && !perRole[fl.Name] {
			out = append(out, fl)
		}
	}
	slices.SortFunc(out, func(a, b *flag.Flag) int { return strings.Compare(a.Name, b.Name) })
	return out
}

const commonFile = "/etc/froog/froog.env"

// runEnvExample prints the example environment file of a role, or of
// the settings the roles share ("common"). Arguments VAR=VALUE set a
// variable rather than leave it commented out with its default; a VAR
// the file does not have is an error.
func runEnvExample(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: froogd env-example common|edge|api|hostctl|migrate [FROOG_X=VALUE…]")
	}
	// The defaults shown are the flags' own, not this environment's.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "FROOG_") {
			os.Unsetenv(k)
		}
	}
	role, sets := args[0], map[string]string{}
	for _, a := range args[1:] {
		k, v, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(k, "FROOG_") {
			return fmt.Errorf("env-example: %q is not FROOG_X=VALUE", a)
		}
		sets[k] = v
	}
	common := map[string]bool{}
	for _, fl := range commonFlags() {
		common[fl.Name] = true
	}
	var flags []*flag.Flag
	var b strings.Builder
	if role == "common" {
		flags = commonFlags()
		fmt.Fprintf(&b, "# %s: the settings froog's roles share. Every froogd-* unit reads this\n# file first, then its role's own (/etc/froog/ROLE.env).\n", commonFile)
	} else {
		i := slices.IndexFunc(serviceRoles, func(r struct {
			name string
			c    func() config
		}) bool {
			return r.name == role
		})
		if i < 0 {
			return fmt.Errorf("env-example: no role %q (common, edge, api, hostctl or migrate)", role)
		}
		flags = roleFlags(serviceRoles[i].c())
		fmt.Fprintf(&b, "# /etc/froog/%s.env: froogd %s's settings, read by the froogd-%s unit after\n# %s. Every flag of `froogd %s` is here in its environment form;\n# a line left commented out keeps the default shown.\n", role, role, role, commonFile, role)
	}
	fmt.Fprintf(&b, "# Written by `froogd env-example` from the flag definitions.\n")
	known := map[string]bool{}
	for _, fl := range flags {
		name := envName(fl.Name)
		known[name] = true
		usage := strings.TrimSuffix(fl.Usage, " ("+name+")")
		fmt.Fprintf(&b, "\n# --%s: %s", fl.Name, usage)
		if fl.DefValue != "" {
			fmt.Fprintf(&b, " [default: %s]", fl.DefValue)
		}
		b.WriteString("\n")
		switch v, set := sets[name]; {
		case role != "common" && common[fl.Name] && !set:
			fmt.Fprintf(&b, "# %s: set in %s\n", name, commonFile)
		case set:
			fmt.Fprintf(&b, "%s=%s\n", name, v)
		default:
			fmt.Fprintf(&b, "#%s=%s\n", name, fl.DefValue)
		}
	}
	for k := range sets {
		if !known[k] {
			return fmt.Errorf("env-example: %s is not a setting of %s", k, role)
		}
	}
	_, err := io.WriteString(stdout, b.String())
	return err
}
