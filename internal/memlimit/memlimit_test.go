package memlimit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// files writes a fake cgroup tree: each key is a path under root, each
// value its content.
func files(t *testing.T, tree map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range tree {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestRead(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		name    string
		tree    map[string]string
		self    string // content of the membership file; "" none
		want    int64
		file    string // the file the limit comes from, under root
		version int
	}{
		{name: "no cgroup file system", tree: map[string]string{"other": ""}},
		{
			name: "v2 container: its own cgroup is the root of the mount",
			tree: map[string]string{"cgroup.controllers": "cpu memory\n", "memory.max": "1073741824\n"},
			self: "0::/\n", want: gib, file: "memory.max", version: 2,
		},
		{
			name: "v2 without a limit", tree: map[string]string{"cgroup.controllers": "memory\n", "memory.max": "max\n"},
			self: "0::/\n", version: 2,
		},
		{
			name: "v2 root cgroup of a host: no memory.max at all", tree: map[string]string{"cgroup.controllers": "memory\n"},
			self: "0::/init.scope\n", version: 2,
		},
		{
			name: "v2 nested: the pod's limit binds a container without its own",
			tree: map[string]string{
				"cgroup.controllers":              "memory\n",
				"kubepods/memory.max":             "max\n",
				"kubepods/pod1/memory.max":        "2147483648\n",
				"kubepods/pod1/ctr/memory.max":    "max\n",
				"kubepods/pod1/ctr/memory.high":   "1\n", // not the limit
				"kubepods/pod1/other/memory.max":  "1\n", // a sibling's
				"kubepods/pod1/ctr/cgroup.procs":  "1\n",
				"kubepods/pod1/ctr/memory.events": "",
			},
			self: "0::/kubepods/pod1/ctr\n", want: 2 * gib, file: "kubepods/pod1/memory.max", version: 2,
		},
		{
			name: "v2 nested: the smaller of the container's and the pod's",
			tree: map[string]string{
				"cgroup.controllers":           "memory\n",
				"kubepods/pod1/memory.max":     "2147483648\n",
				"kubepods/pod1/ctr/memory.max": "536870912\n",
			},
			self: "0::/kubepods/pod1/ctr\n", want: gib / 2, file: "kubepods/pod1/ctr/memory.max", version: 2,
		},
		{
			name: "v2: a host path the mount does not show leaves the root's limit",
			tree: map[string]string{"cgroup.controllers": "memory\n", "memory.max": "1073741824\n"},
			self: "0::/system.slice/docker-abc.scope\n", want: gib, file: "memory.max", version: 2,
		},
		{
			name: "v2 without a membership file: the root's limit",
			tree: map[string]string{"cgroup.controllers": "memory\n", "memory.max": "1073741824\n"},
			want: gib, file: "memory.max", version: 2,
		},
		{
			name: "v1 container",
			tree: map[string]string{"memory/memory.limit_in_bytes": "536870912\n", "cpu/cpu.shares": "1024\n"},
			self: "4:memory:/\n1:cpu,cpuacct:/\n0::/\n", want: gib / 2, file: "memory/memory.limit_in_bytes", version: 1,
		},
		{
			name: "v1 without a limit (the kernel's largest page-aligned number)",
			tree: map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"},
			self: "4:memory:/\n", version: 1,
		},
		{
			name: "v1 nested, found through the line that lists memory among others",
			tree: map[string]string{
				"memory/memory.limit_in_bytes":           "9223372036854771712\n",
				"memory/docker/memory.limit_in_bytes":    "9223372036854771712\n",
				"memory/docker/c1/memory.limit_in_bytes": "805306368\n",
			},
			self: "9:cpu:/docker/c1\n4:blkio,memory:/docker/c1\n0::/\n", want: 768 << 20, file: "memory/docker/c1/memory.limit_in_bytes", version: 1,
		},
		{
			name: "hybrid: a unified tree without the memory controller, v1 memory",
			tree: map[string]string{"unified/cgroup.controllers": "", "memory/memory.limit_in_bytes": "268435456\n"},
			self: "4:memory:/\n0::/\n", want: gib / 4, file: "memory/memory.limit_in_bytes", version: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := files(t, tc.tree)
			s := Source{Root: root}
			if tc.self != "" {
				s.Self = filepath.Join(t.TempDir(), "cgroup")
				if err := os.WriteFile(s.Self, []byte(tc.self), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.Read()
			if err != nil {
				t.Fatal(err)
			}
			want := Limit{Bytes: tc.want, Version: tc.version}
			if tc.file != "" {
				want.File = filepath.Join(root, filepath.FromSlash(tc.file))
			}
			if got != want {
				t.Errorf("Read() = %+v, want %+v", got, want)
			}
		})
	}
}

// A limit file that holds no number is an error naming the file, not "no
// limit": a node must not silently run without the limit it was given.
func TestReadRefusesAMalformedFile(t *testing.T) {
	for _, tree := range []map[string]string{
		{"cgroup.controllers": "memory\n", "memory.max": "lots\n"},
		{"cgroup.controllers": "memory\n", "memory.max": "-5\n"},
		{"memory/memory.limit_in_bytes": "12k\n"},
	} {
		root := files(t, tree)
		_, err := Source{Root: root}.Read()
		if err == nil || !strings.Contains(err.Error(), root) {
			t.Errorf("%v: Read() error %v, want one naming the file", tree, err)
		}
	}
}

// The real system's files read without error, whatever the machine.
func TestReadTheRealSystem(t *testing.T) {
	l, err := Default().Read()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("this machine: %+v", l)
}
