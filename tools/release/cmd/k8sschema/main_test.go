package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestSchemas writes the schemas and checks them as kubeconform uses them
// (the same validator, draft 4 by default): each compiles, accepts a
// well-formed object, and refuses a misspelt field and a wrong type.
func TestSchemas(t *testing.T) {
	dir := t.TempDir()
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		file, valid string
		invalid     []string
	}{
		{"statefulset-apps-v1.json",
			`{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"r"},"spec":{"serviceName":"h","replicas":3,"ordinals":{"start":1},"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i","ports":[{"name":"http","containerPort":7070}],"readinessProbe":{"httpGet":{"path":"/readyz","port":"http"}},"resources":{"requests":{"cpu":"500m","memory":"1Gi"},"limits":{"memory":2147483648}}}]}}}}`,
			[]string{
				`{"apiVersion":"apps/v1","kind":"StatefulSet","spec":{"replica":3}}`,
				`{"apiVersion":"apps/v1","kind":"StatefulSet","spec":{"replicas":"three"}}`,
				`{"apiVersion":"apps/v1","kind":"StatefulSet","spec":{"template":{"metadata":{"annotations":null}}}}`,
			}},
		{"service-v1.json",
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"r"},"spec":{"clusterIP":"None","publishNotReadyAddresses":true,"ports":[{"name":"http","port":7070,"targetPort":"http"}]}}`,
			[]string{`{"apiVersion":"v1","kind":"Service","spec":{"port":[{"port":7070}]}}`}},
		{"secret-v1.json",
			`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"r"},"type":"Opaque","data":{"secret":"c2VjcmV0"}}`,
			[]string{`{"apiVersion":"v1","kind":"Secret","datas":{}}`}},
		{"poddisruptionbudget-policy-v1.json",
			`{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"r"},"spec":{"maxUnavailable":1,"selector":{"matchLabels":{"a":"b"}}}}`,
			[]string{`{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"maxUnavailable":true}}`}},
	}
	for _, c := range cases {
		path := filepath.Join(dir, c.file)
		f, err := os.Open(path)
		if err != nil {
			t.Error(err)
			continue
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		comp := jsonschema.NewCompiler()
		comp.DefaultDraft(jsonschema.Draft4)
		if err := comp.AddResource(path, doc); err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		sch, err := comp.Compile(path)
		if err != nil {
			t.Errorf("%s does not compile: %v", c.file, err)
			continue
		}
		check := func(obj string) error {
			v, err := jsonschema.UnmarshalJSON(strings.NewReader(obj))
			if err != nil {
				t.Fatal(err)
			}
			return sch.Validate(v)
		}
		if err := check(c.valid); err != nil {
			t.Errorf("%s refuses a valid object: %v", c.file, err)
		}
		for _, bad := range c.invalid {
			if check(bad) == nil {
				t.Errorf("%s accepts %s", c.file, bad)
			}
		}
	}
}
