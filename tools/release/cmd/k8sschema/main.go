// Command k8sschema writes the JSON schemas kubeconform validates the Helm
// chart's objects with, for the kinds the chart renders, without a
// network: kubeconform downloads its schemas, which CI cannot.
//
//	go run -C tools/release ./cmd/k8sschema -o DIR
//	kubeconform -schema-location 'DIR/{{ .ResourceKind }}{{ .KindSuffix }}.json' ...
//
// The schemas come from the OpenAPI documents that the Kubernetes modules
// pinned by tools/release/go.mod ship as test data (k8s.io/kubectl's
// OpenAPI v3 documents for apps/v1 and v1, k8s.io/cli-runtime's v2
// document for policy/v1), so they change only when go.mod does. Each file
// is self-contained (the definitions it refers to are inlined under
// "definitions") and strict: an object with declared properties allows no
// others, so a misspelt field is an error, as `kubectl apply
// --validate=strict` would make it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// kinds are the chart's kinds (deploy/helm/rewind/templates), but the
// ServiceMonitor: a CRD of the Prometheus operator, whose schema is not
// in any Kubernetes module (kubeconform skips it).
var kinds = []struct{ kind, group, version, definition string }{
	{"StatefulSet", "apps", "v1", "io.k8s.api.apps.v1.StatefulSet"},
	{"Service", "", "v1", "io.k8s.api.core.v1.Service"},
	{"Secret", "", "v1", "io.k8s.api.core.v1.Secret"},
	{"PodDisruptionBudget", "policy", "v1", "io.k8s.api.policy.v1.PodDisruptionBudget"},
}

// sources are the OpenAPI documents, by module and path; a definition is
// taken from the first that has it (the v3 documents are newer: apps/v1's
// has StatefulSet's ordinals).
var sources = []struct{ module, path string }{
	{"k8s.io/kubectl", "testdata/openapi/v3/apis/apps/v1.json"},
	{"k8s.io/kubectl", "testdata/openapi/v3/api/v1.json"},
	{"k8s.io/cli-runtime", "artifacts/openapi/swagger.json"},
}

func main() {
	out := flag.String("o", "", "directory to write the schemas to")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: k8sschema -o DIR")
		os.Exit(2)
	}
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "k8sschema:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	defs := map[string]any{}
	for _, s := range sources {
		dir, err := moduleDir(s.module)
		if err != nil {
			return err
		}
		d, err := readDefinitions(filepath.Join(dir, s.path))
		if err != nil {
			return err
		}
		for name, def := range d {
			if _, ok := defs[name]; !ok {
				defs[name] = def
			}
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, k := range kinds {
		schema, err := standalone(defs, k.definition)
		if err != nil {
			return err
		}
		b, err := json.MarshalIndent(schema, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, fileName(k.kind, k.group, k.version)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// fileName is kubeconform's {{ .ResourceKind }}{{ .KindSuffix }}.json.
func fileName(kind, group, version string) string {
	suffix := "-" + version
	if group != "" {
		first, _, _ := strings.Cut(group, ".")
		suffix = "-" + first + suffix
	}
	return strings.ToLower(kind) + suffix + ".json"
}

// moduleDir is where the module, at the version tools/release/go.mod
// pins, is in the module cache (downloading it if needed). It runs in the
// directory of tools/release's go.mod.
func moduleDir(module string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	if m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no directory (%s)", module, m.Error)
	}
	return m.Dir, nil
}

// readDefinitions reads an OpenAPI v2 (definitions) or v3
// (components.schemas) document's schemas.
func readDefinitions(file string) (map[string]any, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Definitions map[string]any `json:"definitions"`
		Components  struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if doc.Definitions != nil {
		return doc.Definitions, nil
	}
	if doc.Components.Schemas == nil {
		return nil, fmt.Errorf("%s: no definitions", file)
	}
	return doc.Components.Schemas, nil
}

const (
	refV2 = "#/definitions/"
	refV3 = "#/components/schemas/"
)

// standalone is root's schema with every definition it refers to,
// transitively, under "definitions".
func standalone(defs map[string]any, root string) (map[string]any, error) {
	needed := map[string]any{}
	var missing []string
	queue := []string{root}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if _, done := needed[name]; done {
			continue
		}
		def, ok := defs[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		conv := convert(def, func(ref string) { queue = append(queue, ref) })
		needed[name] = conv
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s refers to definitions no source has: %s", root, strings.Join(missing, ", "))
	}
	schema := map[string]any{}
	maps.Copy(schema, needed[root].(map[string]any))
	delete(needed, root)
	schema["$schema"] = "http://json-schema.org/draft-07/schema#"
	schema["definitions"] = needed
	return schema, nil
}

// convert copies an OpenAPI schema as a strict JSON schema: references
// point under "#/definitions/" (ref is told each one), int-or-string and
// Quantity accept both of their forms, and objects with properties allow
// no others.
func convert(v any, ref func(string)) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if strings.HasPrefix(k, "x-kubernetes-") || k == "description" {
				continue
			}
			if props, ok := x[k].(map[string]any); ok && k == "properties" {
				// Names of fields, not keywords: each value is a schema.
				conv := map[string]any{}
				for name, p := range props {
					conv[name] = convert(p, ref)
				}
				out[k] = conv
				continue
			}
			out[k] = convert(x[k], ref)
		}
		if r, ok := out["$ref"].(string); ok {
			name := strings.TrimPrefix(strings.TrimPrefix(r, refV3), refV2)
			ref(name)
			out["$ref"] = refV2 + name
		}
		if out["format"] == "int-or-string" || x["x-kubernetes-int-or-string"] == true {
			delete(out, "type")
			delete(out, "format")
			out["oneOf"] = []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}
		}
		if enum, ok := out["enum"].([]any); ok {
			out["enum"] = dedupe(enum) // Kubernetes' documents repeat values, which JSON schema forbids
		}
		if _, ok := out["properties"]; ok {
			if _, set := out["additionalProperties"]; !set {
				out["additionalProperties"] = false
			}
		}
		// OpenAPI's nullable: a JSON null is allowed too.
		if out["nullable"] == true {
			delete(out, "nullable")
			if t, ok := out["type"].(string); ok {
				out["type"] = []any{t, "null"}
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = convert(e, ref)
		}
		return out
	default:
		return v
	}
}

// dedupe is values without repeats, in their first order.
func dedupe(values []any) []any {
	seen := map[string]bool{}
	var out []any
	for _, v := range values {
		b, _ := json.Marshal(v)
		if !seen[string(b)] {
			seen[string(b)] = true
			out = append(out, v)
		}
	}
	return out
}
