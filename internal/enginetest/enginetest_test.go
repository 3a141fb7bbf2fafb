//go:build unix

package enginetest_test

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// A node serves until Stop, and Stop is idempotent.
func TestStartNodeServesUntilStop(t *testing.T) {
	n := enginetest.StartNode(t, engine.Config{})
	ctx := context.Background()
	if _, err := client.New(n.URL).CreateTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := n.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if _, err := http.Get(n.URL + "/livez"); err == nil {
		t.Fatal("a stopped node still answers")
	}
}

// A restarted member is back on its port with its data.
func TestClusterRestartKeepsPortAndData(t *testing.T) {
	c := enginetest.StartCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := client.New(c.Node(1).URL)
	for {
		_, err := cl.CreateTopic(ctx, "t", client.WithReplicationFactor(3))
		if err == nil || connect.CodeOf(err) == connect.CodeAlreadyExists {
			break
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	before := c.Node(2)
	after := c.Restart(2)
	if after.URL != before.URL || after.Config.Dir != before.Config.Dir {
		t.Fatalf("restarted at %s in %s, was %s in %s", after.URL, after.Config.Dir, before.URL, before.Config.Dir)
	}
	for {
		topics, err := client.New(after.URL).ListTopics(ctx)
		if err == nil && len(topics) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the restarted member lists %v, %v; want topic t", topics, err)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// The binary is built once: a second call, as another package's test
// binary would make it, finds it.
func TestBinaryIsBuiltOnce(t *testing.T) {
	bin := enginetest.Binary(t)
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if again := enginetest.Binary(t); again != bin {
		t.Fatalf("second build at %s, first at %s", again, bin)
	}
	if fi2, _ := os.Stat(bin); !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatal("the binary was rebuilt")
	}
}

// A process node starts, answers as itself, and stops gracefully.
func TestStartProcess(t *testing.T) {
	p := enginetest.StartProcess(t, enginetest.ProcessConfig{})
	if _, err := client.New(p.URL).ListTopics(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.Stop(t)
}
