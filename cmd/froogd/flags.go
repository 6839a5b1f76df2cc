package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// config is one role's configuration: bind declares its flags, each
// filling a field, and validate reports every problem at once.
type config interface {
	bind(f flags)
	validate() error
}

// parseConfig fills c from args and the FROOG_* environment, and
// validates it.
func parseConfig(name string, c config, args []string, stderr io.Writer) error {
	f := newFlags(name, stderr)
	c.bind(f)
	if err := f.parse(args); err != nil {
		return err
	}
	return c.validate()
}

// flags is a flag set whose defaults come from FROOG_* variables.
type flags struct {
	*flag.FlagSet
	errs *[]error // bad environment values, reported by parse
}

func newFlags(name string, stderr io.Writer) flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return flags{fs, new([]error)}
}

// parse parses args and reports every bad value at once.
func (f flags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		*f.errs = append(*f.errs, fmt.Errorf("unexpected argument %q", f.Arg(0)))
	}
	return errors.Join(*f.errs...)
}

func envName(flagName string) string {
	return "FROOG_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// str declares a string flag filling p.
func (f flags) str(p *string, name, def, usage string) {
	if v, ok := os.LookupEnv(envName(name)); ok {
		def = v
	}
	f.StringVar(p, name, def, usage+" ("+envName(name)+")")
}

// num declares a whole-number flag filling p.
func (f flags) num(p *int, name string, def int, usage string) {
	*p = def
	if v, ok := os.LookupEnv(envName(name)); ok {
		if _, err := fmt.Sscan(v, p); err != nil {
			*f.errs = append(*f.errs, fmt.Errorf("%s=%q: want a whole number", envName(name), v))
		}
	}
	f.IntVar(p, name, *p, usage+" ("+envName(name)+")")
}

// boolean declares a true-or-false flag filling p.
func (f flags) boolean(p *bool, name string, def bool, usage string) {
	*p = def
	if v, ok := os.LookupEnv(envName(name)); ok {
		if b, err := strconv.ParseBool(v); err == nil {
			*p = b
		} else {
			*f.errs = append(*f.errs, fmt.Errorf("%s=%q: want true or false", envName(name), v))
		}
	}
	f.BoolVar(p, name, *p, usage+" ("+envName(name)+")")
}

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// required reports each named flag whose value is empty.
func required(flags map[string]string) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		if flags[name] == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	return errs
}

// checkPort reports a port outside 1-65535, naming its flag.
func checkPort(flag string, port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("%s %d: want 1-65535", flag, port)
	}
	return nil
}
