package main

// `rewind serve` reads each of its settings from four places, the first
// that has it winning: the command line, the environment (REWIND_<FLAG>),
// the configuration file (--config FILE, HCL: <flag> = value) and the
// flag's default. The settings are the flags themselves: the environment
// variables and the file's attributes are derived from serve's FlagSet
// when it runs, so a flag added later is configurable everywhere at once
// (docs/operations.md, "Configuration").

import (
	"errors"
	"fmt"
	"maps"
	"math/big"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/zclconf/go-cty/cty"
)

const (
	// configFlag names the configuration file; it is no attribute of it.
	configFlag = "config"
	// commaList marks a string flag that holds a comma-separated list
	// (--initial-cluster, --join, ...): the file may give it as a list of
	// strings.
	commaList = "rewind/comma-list"
)

// markCommaList marks the named flags of fs as comma-separated lists.
func markCommaList(fs *pflag.FlagSet, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, commaList, []string{"true"}); err != nil {
			panic(err) // a flag renamed without this list: our bug
		}
	}
}

// configurable returns the flags of cmd that the environment and the file
// may set: its own, without --config, --help and the hidden ones (for
// tests, such as --peer-via: only a command line sets them). The client
// commands' global flags (--server, --token, ...) are none of serve's.
func configurable(cmd *cobra.Command) []*pflag.Flag {
	var out []*pflag.Flag
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != configFlag && f.Name != "help" && !f.Hidden {
			out = append(out, f)
		}
	})
	return out
}

// envName is the environment variable of one of cmd's flags:
// REWIND_<FLAG>, upper case, '-' as '_'. A flag that shares its name with
// a global flag of the client commands (serve's --tls-cert and --tls-key,
// the server's pair, and the client's certificate) reads
// REWIND_SERVE_<FLAG>: the client's REWIND_TLS_CERT in a shell must not
// turn TLS on for a server started from it.
func envName(cmd *cobra.Command, flag string) string {
	name := strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
	if cmd.Root() != cmd && cmd.Root().PersistentFlags().Lookup(flag) != nil {
		return "REWIND_SERVE_" + name
	}
	return "REWIND_" + name
}

// attrName is the configuration file's attribute of a flag.
func attrName(flag string) string { return strings.ReplaceAll(flag, "-", "_") }

// applyConfig fills the flags of cmd that the command line left unset
// from the environment (lookupEnv; an empty value counts as unset) and
// then from the file --config (or REWIND_CONFIG) names. A setting taken
// from either counts as set by the user (Flag.Changed), like one on the
// command line. Nothing of the file is applied unless all of it parses
// and has the right types; every problem found is reported at once.
func applyConfig(cmd *cobra.Command, lookupEnv func(string) (string, bool)) error {
	fs := cmd.Flags()
	getenv := func(name string) (string, bool) {
		v, ok := lookupEnv(name)
		return v, ok && v != ""
	}
	path, _ := fs.GetString(configFlag)
	if !fs.Changed(configFlag) {
		path, _ = getenv(envName(cmd, configFlag))
	}
	var file map[string]fileSetting
	if path != "" {
		var err error
		if file, err = readConfigFile(cmd, path); err != nil {
			return err
		}
	}
	var errs []error
	for _, f := range configurable(cmd) {
		if f.Changed {
			continue // the command line wins
		}
		env := envName(cmd, f.Name)
		if v, ok := getenv(env); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("environment variable %s=%q (--%s): %w", env, v, f.Name, causeOf(err)))
			}
			continue
		}
		if s, ok := file[f.Name]; ok {
			if err := s.apply(fs, f); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s = %s: %w", where(s.rng), attrName(f.Name), s.show(), err))
			}
		}
	}
	what := "the environment"
	if path != "" {
		what += " and " + path
	}
	return problems(what, errs)
}

// problems joins errs, found in what, saying how many there are when
// there are several.
func problems(what string, errs []error) error {
	if len(errs) < 2 {
		return errors.Join(errs...)
	}
	return fmt.Errorf("%d problems in %s:\n%w", len(errs), what, errors.Join(errs...))
}

// fileSetting is one attribute of the configuration file, as the flag's
// string values.
type fileSetting struct {
	values []string
	list   bool // a slice flag: values replace its whole list
	rng    hcl.Range
}

func (s fileSetting) apply(fs *pflag.FlagSet, f *pflag.Flag) error {
	if !s.list {
		return causeOf(fs.Set(f.Name, s.values[0]))
	}
	if err := f.Value.(pflag.SliceValue).Replace(s.values); err != nil {
		return err
	}
	f.Changed = true
	return nil
}

// causeOf is the reason of pflag's error, without its "invalid argument
// for --flag", which names the wrong place for a value from the file or
// the environment.
func causeOf(err error) error {
	if c := errors.Unwrap(err); c != nil {
		return c
	}
	return err
}

func (s fileSetting) show() string {
	if s.list {
		return fmt.Sprintf("%q", s.values)
	}
	return strconv.Quote(s.values[0])
}

// where renders a position in the file as FILE:LINE.
func where(r hcl.Range) string { return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line) }

// readConfigFile parses the HCL file at path into settings of cmd's
// flags, by flag name. Blocks, unknown attributes, attributes spelt with
// '-' and values of the wrong type are errors naming FILE:LINE, all of
// them together.
func readConfigFile(cmd *cobra.Command, path string) (map[string]fileSetting, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	f, diags := hclparse.NewParser().ParseHCL(src, path)
	if diags.HasErrors() {
		return nil, diags
	}
	attrs, diags := f.Body.JustAttributes()
	if diags.HasErrors() {
		return nil, diags
	}
	known := map[string]*pflag.Flag{}
	for _, fl := range configurable(cmd) {
		known[attrName(fl.Name)] = fl
	}
	out := map[string]fileSetting{}
	var errs []error
	for _, a := range sortedAttributes(attrs) {
		fl, ok := known[a.Name]
		if !ok {
			errs = append(errs, unknownAttribute(cmd, a))
			continue
		}
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			errs = append(errs, diags)
			continue
		}
		s, err := settingOf(fl, v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", where(a.Expr.Range()), a.Name, err))
			continue
		}
		s.rng = a.Expr.Range()
		out[fl.Name] = s
	}
	if len(errs) > 0 {
		return nil, problems(path, errs)
	}
	return out, nil
}

// sortedAttributes returns attrs in the order of the file.
func sortedAttributes(attrs hcl.Attributes) []*hcl.Attribute {
	return slices.SortedFunc(maps.Values(attrs), func(a, b *hcl.Attribute) int {
		return a.Range.Start.Byte - b.Range.Start.Byte
	})
}

func unknownAttribute(cmd *cobra.Command, a *hcl.Attribute) error {
	at := where(a.NameRange)
	switch {
	case a.Name == configFlag:
		return fmt.Errorf("%s: %q is no setting of the file (a file cannot name another)", at, a.Name)
	case strings.Contains(a.Name, "-") && cmd.LocalFlags().Lookup(a.Name) != nil:
		return fmt.Errorf("%s: unknown attribute %q: write it %s (flags' '-' are '_' in the file)", at, a.Name, attrName(a.Name))
	}
	return fmt.Errorf("%s: unknown attribute %q: %s has no flag --%s", at, a.Name, cmd.CommandPath(), strings.ReplaceAll(a.Name, "_", "-"))
}

// settingOf turns an HCL value into the string values flag f parses,
// refusing a value of the wrong type: booleans for bool flags, numbers
// for numeric ones, strings for the rest (durations as "5s", sizes as
// "512MiB"), lists for list flags.
func settingOf(f *pflag.Flag, v cty.Value) (fileSetting, error) {
	if v.IsNull() {
		return fileSetting{}, errors.New("null is no value; leave the attribute out for the default")
	}
	if _, ok := f.Value.(pflag.SliceValue); ok {
		elem := strings.TrimSuffix(strings.TrimSuffix(f.Value.Type(), "Slice"), "Array")
		values, err := listOf(v, elem)
		return fileSetting{values: values, list: true}, err
	}
	if f.Value.Type() == "string" && f.Annotations[commaList] != nil && isList(v) {
		values, err := listOf(v, "string")
		if err != nil {
			return fileSetting{}, err
		}
		return fileSetting{values: []string{strings.Join(values, ",")}}, nil
	}
	s, err := scalarOf(v, f.Value.Type())
	return fileSetting{values: []string{s}}, err
}

func isList(v cty.Value) bool {
	t := v.Type()
	return t.IsListType() || t.IsTupleType() || t.IsSetType()
}

// listOf returns the elements of a list value, each of type elem.
func listOf(v cty.Value, elem string) ([]string, error) {
	if !isList(v) {
		return nil, fmt.Errorf("want a list such as [%s], got %s", example(elem), aType(v.Type()))
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			return nil, errors.New("null in the list")
		}
		s, err := scalarOf(e, elem)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", len(out), err)
		}
		out = append(out, s)
	}
	return out, nil
}

// scalarOf returns one value for a flag of pflag type typ.
func scalarOf(v cty.Value, typ string) (string, error) {
	want := cty.String
	switch typ {
	case "bool":
		want = cty.Bool
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "count", "float32", "float64":
		want = cty.Number
	case "string", "duration":
	default:
		// A flag type of its own: its Set parses the text of whatever
		// primitive the file gives.
		if !v.Type().IsPrimitiveType() {
			return "", fmt.Errorf("want a string, number or bool, got %s", aType(v.Type()))
		}
		want = v.Type()
	}
	if !v.Type().Equals(want) {
		return "", fmt.Errorf("want a %s such as %s, got %s", want.FriendlyName(), example(typ), aType(v.Type()))
	}
	switch want {
	case cty.Bool:
		return strconv.FormatBool(v.True()), nil
	case cty.Number:
		bf := v.AsBigFloat()
		if strings.HasPrefix(typ, "float") {
			return bf.Text('g', -1), nil
		}
		if !bf.IsInt() {
			return "", fmt.Errorf("want a whole number, got %s", bf.Text('g', -1))
		}
		if bf.MantExp(nil) > 64 { // 1e999999999 would take gigabytes as a big.Int
			return "", fmt.Errorf("%s is out of range", bf.Text('g', 6))
		}
		i, _ := bf.Int(new(big.Int))
		return i.String(), nil
	}
	return v.AsString(), nil
}

// aType names a value's type for an error: "a list", "an object", "a string".
func aType(t cty.Type) string {
	switch {
	case t.IsListType() || t.IsTupleType() || t.IsSetType():
		return "a list"
	case t.IsObjectType() || t.IsMapType():
		return "an object"
	}
	return "a " + t.FriendlyName()
}

// example shows a value of a flag type in the file's syntax.
func example(typ string) string {
	switch typ {
	case "bool":
		return "true"
	case "duration":
		return `"5s"`
	case "string":
		return `"text"`
	case "float32", "float64":
		return "0.5"
	}
	return "256"
}
