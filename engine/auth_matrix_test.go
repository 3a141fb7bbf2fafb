package engine_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rewind-io/rewind/engine/internal/resume"
	"github.com/rewind-io/rewind/internal/wasmgen"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// rpcs is a raw Connect client of every public service, sending token.
type rpcs struct {
	topics  rewindv1connect.TopicServiceClient
	pub     rewindv1connect.PublishServiceClient
	sub     rewindv1connect.SubscribeServiceClient
	groups  rewindv1connect.GroupServiceClient
	plugins rewindv1connect.PluginServiceClient
	cluster rewindv1connect.ClusterServiceClient
	auth    rewindv1connect.AuthServiceClient
	store   rewindv1connect.EventStoreServiceClient
}

type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if b != "" {
			req.Header().Set("Authorization", "Bearer "+string(b))
		}
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if b != "" {
			conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		}
		return conn
	}
}

func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func newRPCs(url, token string) *rpcs {
	o := connect.WithInterceptors(bearer(token))
	h := http.DefaultClient
	return &rpcs{
		topics: rewindv1connect.NewTopicServiceClient(h, url, o), pub: rewindv1connect.NewPublishServiceClient(h, url, o),
		sub: rewindv1connect.NewSubscribeServiceClient(h, url, o), groups: rewindv1connect.NewGroupServiceClient(h, url, o),
		plugins: rewindv1connect.NewPluginServiceClient(h, url, o), cluster: rewindv1connect.NewClusterServiceClient(h, url, o),
		auth: rewindv1connect.NewAuthServiceClient(h, url, o), store: rewindv1connect.NewEventStoreServiceClient(h, url, o),
	}
}

// fixture names the resources one case acts on; the test creates them
// before the case runs.
type fixture struct {
	topic, group, plugin string
	// digest is the sha256 (hex) of the plugin's module, which the plugin
	// {plugin}-alias has as well; no other plugin has it.
	digest string
	// signed is a resume token a stream handed out (signed); forged one
	// made by hand for offset 0 (unsigned).
	signed, forged string
}

// matrixCase is one call of one procedure and the rights it needs, as
// "op kind:name" ({topic}, {group}, {plugin} stand for the fixture's).
// "a|b" is a right that either a or b gives: the principal with exactly
// the rights gets a, the one refused lacks both.
type matrixCase struct {
	proc  string
	name  string
	needs []string
	call  func(ctx context.Context, c *rpcs, f fixture) error
}

var filterModule = wasmgen.ABIModule(2, wasmgen.Body(wasmgen.I32Const(0), wasmgen.OpEnd), nil)

func stream(ctx context.Context, c *rpcs, req *rewindv1.SubscribeRequest) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := c.sub.Subscribe(ctx, req)
	if err != nil {
		return err
	}
	defer st.Close()
	if st.Receive() {
		return nil
	}
	return st.Err()
}

func start(p *rewindv1.StartPosition) *rewindv1.StartPosition { return p }

var matrix = []matrixCase{
	{rewindv1connect.TopicServiceCreateTopicProcedure, "", []string{"create topic:{topic}-new"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: f.topic + "-new", Config: &rewindv1.TopicConfig{Partitions: 1}})
		return err
	}},
	{rewindv1connect.TopicServiceListTopicsProcedure, "", nil, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.topics.ListTopics(ctx, &rewindv1.ListTopicsRequest{})
		return err
	}},
	{rewindv1connect.TopicServiceDescribeTopicProcedure, "", []string{"describe topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.topics.DescribeTopic(ctx, &rewindv1.DescribeTopicRequest{Name: f.topic})
		return err
	}},
	{rewindv1connect.TopicServiceAlterTopicProcedure, "", []string{"alter topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.topics.AlterTopic(ctx, &rewindv1.AlterTopicRequest{Name: f.topic, Retention: &rewindv1.Retention{MaxRecords: 1000}})
		return err
	}},
	{rewindv1connect.TopicServiceDeleteTopicProcedure, "", []string{"delete topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.topics.DeleteTopic(ctx, &rewindv1.DeleteTopicRequest{Name: f.topic})
		return err
	}},
	{rewindv1connect.PublishServicePublishProcedure, "", []string{"publish topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.pub.Publish(ctx, &rewindv1.PublishRequest{Topic: f.topic, Records: []*rewindv1.PublishRecord{{Value: []byte("x")}}})
		return err
	}},
	{rewindv1connect.EventStoreServiceReadProcedure, "", []string{"replay topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.store.Read(ctx, &rewindv1.ReadRequest{Topic: f.topic, Select: &rewindv1.ReadRequest_Key{Key: []byte("k")}})
		return err
	}},
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "latest", []string{"read topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_Latest{Latest: true}})})
	}},
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "earliest", []string{"replay topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic})
	}},
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "offset", []string{"replay topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_Offset{Offset: 1}})})
	}},
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "past-time", []string{"replay topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_Time{Time: timestamppb.New(time.Now().Add(-time.Hour))}})})
	}},
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "future-time", []string{"read topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_Time{Time: timestamppb.New(time.Now().Add(time.Hour))}})})
	}},
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "records-back", []string{"replay topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_RecordsBack{RecordsBack: 2}})})
	}},
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "unsigned-resume-token", []string{"replay topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		// What a read-only principal might forge: offset 0.
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_ResumeToken{ResumeToken: f.forged}})})
	}},
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "resigned-resume-token", []string{"replay topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		// The forged token under the signature of another one.
		_, sig, _ := strings.Cut(f.signed, ".")
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_ResumeToken{ResumeToken: f.forged + "." + sig}})})
	}},
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "signed-resume-token", []string{"read topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		// The caller's own stream hands out a token signed for it.
		signed, _, err := resumeTokens(ctx, c, f.topic)
		if err != nil {
			return err
		}
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_ResumeToken{ResumeToken: signed}})})
	}},
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "group", []string{"read topic:{topic}", "join group:{group}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Group: f.group, Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_Latest{Latest: true}})})
	}},
	// The fixture's group has a commit in every partition: a member resumes
	// from it whatever its start; a group without commits starts there.
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "group-resume", []string{"read topic:{topic}", "join group:{group}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Group: f.group})
	}},
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "group-earliest", []string{"replay topic:{topic}", "join group:{group}-new"}, func(ctx context.Context, c *rpcs, f fixture) error {
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Group: f.group + "-new"})
	}},
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "plugin-filter", []string{"replay topic:{topic}", "use plugin:{plugin}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Filter: &rewindv1.ReplayFilter{Module: &rewindv1.ReplayFilter_Plugin{Plugin: f.plugin}}})
	}},
	// A plugin named by its module's digest is every plugin with that
	// module: {plugin} and {plugin}-alias.
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "plugin-digest-filter", []string{"replay topic:{topic}", "use plugin:{plugin}", "use plugin:{plugin}-alias"}, func(ctx context.Context, c *rpcs, f fixture) error {
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Filter: &rewindv1.ReplayFilter{Module: &rewindv1.ReplayFilter_Plugin{Plugin: "sha256:" + f.digest}}})
	}},
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "plugin-name-at-digest-filter", []string{"replay topic:{topic}", "use plugin:{plugin}-alias", "use plugin:{plugin}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Filter: &rewindv1.ReplayFilter{Module: &rewindv1.ReplayFilter_Plugin{Plugin: f.plugin + "-alias@sha256:" + f.digest}}})
	}},
	{rewindv1connect.SubscribeServiceSubscribeProcedure, "inline-filter", []string{"replay topic:{topic}", "inline plugin:*"}, func(ctx context.Context, c *rpcs, f fixture) error {
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: f.topic, Filter: &rewindv1.ReplayFilter{Module: &rewindv1.ReplayFilter_Inline{Inline: filterModule}}})
	}},
	{rewindv1connect.GroupServiceCommitProcedure, "forward", []string{"commit group:{group}", "read topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.groups.Commit(ctx, &rewindv1.CommitRequest{Group: f.group, Topic: f.topic, Offsets: []*rewindv1.PartitionOffset{{Partition: 0, Offset: 3}}})
		return err
	}},
	{rewindv1connect.GroupServiceCommitProcedure, "back", []string{"commit group:{group}", "read topic:{topic}", "reset group:{group}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.groups.Commit(ctx, &rewindv1.CommitRequest{Group: f.group, Topic: f.topic, Offsets: []*rewindv1.PartitionOffset{{Partition: 0, Offset: 0}}})
		return err
	}},
	// A group's first commit in a partition: at the end it starts the
	// group where a live reader would; below the end it starts the group
	// in the history (the fixture's topic has 3 records).
	{rewindv1connect.GroupServiceCommitProcedure, "first-at-end", []string{"commit group:{group}-new", "read topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.groups.Commit(ctx, &rewindv1.CommitRequest{Group: f.group + "-new", Topic: f.topic, Offsets: []*rewindv1.PartitionOffset{{Partition: 0, Offset: 3}}})
		return err
	}},
	{rewindv1connect.GroupServiceCommitProcedure, "first-below-end", []string{"commit group:{group}-new", "read topic:{topic}", "replay topic:{topic}|reset group:{group}-new"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.groups.Commit(ctx, &rewindv1.CommitRequest{Group: f.group + "-new", Topic: f.topic, Offsets: []*rewindv1.PartitionOffset{{Partition: 0, Offset: 0}}})
		return err
	}},
	{rewindv1connect.GroupServiceCommitProcedure, "first-below-end-reset", []string{"commit group:{group}-new", "read topic:{topic}", "reset group:{group}-new|replay topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.groups.Commit(ctx, &rewindv1.CommitRequest{Group: f.group + "-new", Topic: f.topic, Offsets: []*rewindv1.PartitionOffset{{Partition: 0, Offset: 1}}})
		return err
	}},
	{rewindv1connect.GroupServiceListGroupsProcedure, "", nil, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.groups.ListGroups(ctx, &rewindv1.ListGroupsRequest{})
		return err
	}},
	{rewindv1connect.GroupServiceDescribeGroupProcedure, "", []string{"describe group:{group}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.groups.DescribeGroup(ctx, &rewindv1.DescribeGroupRequest{Group: f.group})
		return err
	}},
	{rewindv1connect.GroupServiceDeleteGroupProcedure, "", []string{"delete group:{group}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.groups.DeleteGroup(ctx, &rewindv1.DeleteGroupRequest{Group: f.group, Force: true})
		return err
	}},
	{rewindv1connect.GroupServiceResetGroupProcedure, "", []string{"reset group:{group}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.groups.ResetGroup(ctx, &rewindv1.ResetGroupRequest{Group: f.group, Topic: f.topic, Target: &rewindv1.ResetTarget{Target: &rewindv1.ResetTarget_Earliest{Earliest: true}}})
		return err
	}},
	{rewindv1connect.PluginServiceUploadPluginProcedure, "", []string{"upload plugin:{plugin}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.plugins.UploadPlugin(ctx, &rewindv1.UploadPluginRequest{Name: f.plugin, Module: wasmgen.ABIModule(2, wasmgen.Body(wasmgen.I32Const(0), wasmgen.OpEnd), nil)})
		return err
	}},
	{rewindv1connect.PluginServiceListPluginsProcedure, "", nil, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.plugins.ListPlugins(ctx, &rewindv1.ListPluginsRequest{})
		return err
	}},
	{rewindv1connect.PluginServiceGetPluginProcedure, "", []string{"describe plugin:{plugin}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.plugins.GetPlugin(ctx, &rewindv1.GetPluginRequest{Plugin: f.plugin})
		return err
	}},
	{rewindv1connect.PluginServiceGetPluginProcedure, "digest", []string{"describe plugin:{plugin}", "describe plugin:{plugin}-alias"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.plugins.GetPlugin(ctx, &rewindv1.GetPluginRequest{Plugin: "sha256:" + strings.ToUpper(f.digest)})
		return err
	}},
	// An unknown digest needs the right on every plugin: without it, the
	// caller cannot tell it from a digest it may not see (NotFound with it).
	{rewindv1connect.PluginServiceGetPluginProcedure, "unknown-digest", []string{"describe plugin:*"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.plugins.GetPlugin(ctx, &rewindv1.GetPluginRequest{Plugin: "sha256:" + strings.Repeat("0", 64)})
		return err
	}},
	{rewindv1connect.PluginServiceDeletePluginProcedure, "", []string{"delete plugin:{plugin}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.plugins.DeletePlugin(ctx, &rewindv1.DeletePluginRequest{Plugin: f.plugin})
		return err
	}},
	{rewindv1connect.PluginServiceDeletePluginProcedure, "digest", []string{"delete plugin:{plugin}", "delete plugin:{plugin}-alias"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.plugins.DeletePlugin(ctx, &rewindv1.DeletePluginRequest{Plugin: "sha256:" + f.digest})
		return err
	}},
	{rewindv1connect.PluginServiceTestPluginProcedure, "records", []string{"use plugin:{plugin}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.plugins.TestPlugin(ctx, &rewindv1.TestPluginRequest{Filter: &rewindv1.ReplayFilter{Module: &rewindv1.ReplayFilter_Plugin{Plugin: f.plugin}},
			Input: &rewindv1.TestPluginRequest_Records{Records: &rewindv1.TestRecords{Records: []*rewindv1.Record{{Value: []byte("x")}}}}})
		return err
	}},
	{rewindv1connect.PluginServiceTestPluginProcedure, "digest", []string{"use plugin:{plugin}", "use plugin:{plugin}-alias"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.plugins.TestPlugin(ctx, &rewindv1.TestPluginRequest{Filter: &rewindv1.ReplayFilter{Module: &rewindv1.ReplayFilter_Plugin{Plugin: "sha256:" + f.digest}},
			Input: &rewindv1.TestPluginRequest_Records{Records: &rewindv1.TestRecords{Records: []*rewindv1.Record{{Value: []byte("x")}}}}})
		return err
	}},
	{rewindv1connect.PluginServiceTestPluginProcedure, "topic", []string{"use plugin:{plugin}", "replay topic:{topic}"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.plugins.TestPlugin(ctx, &rewindv1.TestPluginRequest{Filter: &rewindv1.ReplayFilter{Module: &rewindv1.ReplayFilter_Plugin{Plugin: f.plugin}},
			Input: &rewindv1.TestPluginRequest_Topic{Topic: &rewindv1.TestTopicRange{Topic: f.topic, Limit: 2}}})
		return err
	}},
	{rewindv1connect.ClusterServiceGetClusterStatusProcedure, "", nil, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.cluster.GetClusterStatus(ctx, &rewindv1.GetClusterStatusRequest{})
		return err
	}},
	{rewindv1connect.ClusterServiceTransferLeaderProcedure, "", []string{"admin cluster"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.cluster.TransferLeader(ctx, &rewindv1.TransferLeaderRequest{Topic: f.topic, Partition: 0, Node: 7})
		return err
	}},
	{rewindv1connect.ClusterServiceAddNodeProcedure, "", []string{"admin cluster"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.cluster.AddNode(ctx, &rewindv1.AddNodeRequest{})
		return err
	}},
	{rewindv1connect.ClusterServiceRemoveNodeProcedure, "", []string{"admin cluster"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.cluster.RemoveNode(ctx, &rewindv1.RemoveNodeRequest{Node: 42})
		return err
	}},
	{rewindv1connect.ClusterServiceRebalanceProcedure, "", []string{"admin cluster"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.cluster.Rebalance(ctx, &rewindv1.RebalanceRequest{DryRun: true})
		return err
	}},
	{rewindv1connect.AuthServiceCreateUserProcedure, "", []string{"admin cluster"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.auth.CreateUser(ctx, &rewindv1.CreateUserRequest{Name: "made-" + f.topic})
		return err
	}},
	{rewindv1connect.AuthServiceListUsersProcedure, "", []string{"admin cluster"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.auth.ListUsers(ctx, &rewindv1.ListUsersRequest{})
		return err
	}},
	{rewindv1connect.AuthServiceRevokeUserProcedure, "", []string{"admin cluster"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.auth.RevokeUser(ctx, &rewindv1.RevokeUserRequest{NameOrTokenId: "victim-" + f.topic})
		return err
	}},
	{rewindv1connect.AuthServiceGrantAclProcedure, "", []string{"admin cluster"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.auth.GrantAcl(ctx, &rewindv1.GrantAclRequest{Rule: &rewindv1.AclRule{Principal: "p", Kind: "topic", Pattern: "*", Operations: []string{"replay"}}})
		return err
	}},
	{rewindv1connect.AuthServiceListAclsProcedure, "", []string{"admin cluster"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.auth.ListAcls(ctx, &rewindv1.ListAclsRequest{})
		return err
	}},
	{rewindv1connect.AuthServiceRevokeAclProcedure, "", []string{"admin cluster"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.auth.RevokeAcl(ctx, &rewindv1.RevokeAclRequest{Id: 1})
		return err
	}},
	{rewindv1connect.AuthServiceCheckAclProcedure, "", []string{"admin cluster"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.auth.CheckAcl(ctx, &rewindv1.CheckAclRequest{Principal: "p", Operation: "read", Resource: "topic:x"})
		return err
	}},
	{rewindv1connect.AuthServiceSetQuotaProcedure, "", []string{"admin cluster"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.auth.SetQuota(ctx, &rewindv1.SetQuotaRequest{Principal: "p-" + f.topic, Quota: &rewindv1.Quota{Streams: 3}})
		return err
	}},
	{rewindv1connect.AuthServiceListQuotasProcedure, "", []string{"admin cluster"}, func(ctx context.Context, c *rpcs, f fixture) error {
		_, err := c.auth.ListQuotas(ctx, &rewindv1.ListQuotasRequest{})
		return err
	}},
}

// publicProcedures lists every RPC of the rewind.v1 services, from the
// generated descriptors.
func publicProcedures(t *testing.T) []string {
	var out []string
	protoregistry.GlobalFiles.RangeFilesByPackage("rewind.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			s := fd.Services().Get(i)
			for j := range s.Methods().Len() {
				out = append(out, fmt.Sprintf("/%s/%s", s.FullName(), s.Methods().Get(j).Name()))
			}
		}
		return true
	})
	if len(out) < 20 {
		t.Fatalf("found only %d procedures: %v", len(out), out)
	}
	slices.Sort(out)
	return out
}

var allOps = map[string][]string{
	"topic":   {"describe", "publish", "read", "replay", "create", "alter", "delete"},
	"group":   {"describe", "join", "commit", "reset", "delete"},
	"plugin":  {"describe", "upload", "use", "inline", "delete"},
	"cluster": {"admin"},
}

// TestAuthMatrix calls every public RPC as a principal with exactly the
// rights it needs (not refused), as one with every right but one of them
// (PermissionDenied) and anonymously (Unauthenticated), and checks that a
// refused call changed nothing: topics (with their offsets and
// retention), groups (with their commits and members), plugins, users and
// rules are compared before and after.
func TestAuthMatrix(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range matrix {
		covered[c.proc] = true
	}
	for _, p := range publicProcedures(t) {
		if !covered[p] {
			t.Errorf("%s has no case in the authorization matrix: add one (and its rule in engine/internal/api/authz.go)", p)
		}
	}
	a := startAuthNode(t, nil)
	ctx := context.Background()
	root := newRPCs(a.url, a.root)
	rootc := a.client(a.root)
	if _, err := root.plugins.UploadPlugin(ctx, &rewindv1.UploadPluginRequest{Name: "shared", Module: filterModule}); err != nil {
		t.Fatal(err)
	}
	for i, mc := range matrix {
		f := fixture{topic: fmt.Sprintf("m%d", i), group: fmt.Sprintf("g%d", i), plugin: fmt.Sprintf("p%d", i)}
		name := strings.TrimPrefix(mc.proc, "/rewind.v1.")
		if mc.name != "" {
			name += "/" + mc.name
		}
		t.Run(name, func(t *testing.T) {
			// Fixtures: a topic with records, a group with a commit on it,
			// a plugin, a user for RevokeUser to aim at.
			if _, err := root.topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: f.topic, Config: &rewindv1.TopicConfig{Partitions: 1}}); err != nil {
				t.Fatal(err)
			}
			if _, err := root.pub.Publish(ctx, &rewindv1.PublishRequest{Topic: f.topic, Records: []*rewindv1.PublishRecord{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}}); err != nil {
				t.Fatal(err)
			}
			if _, err := root.groups.ResetGroup(ctx, &rewindv1.ResetGroupRequest{Group: f.group, Topic: f.topic, Create: true,
				Target: &rewindv1.ResetTarget{Target: &rewindv1.ResetTarget_Offset{Offset: 2}}}); err != nil {
				t.Fatal(err)
			}
			// The fixture's plugin has a module of its own, under two names.
			mod := wasmgen.ABIModule(2, wasmgen.Body(wasmgen.I32Const(0), wasmgen.OpEnd), func(m *wasmgen.Module) { m.Custom("fixture", []byte(f.plugin)) })
			f.digest = fmt.Sprintf("%x", sha256.Sum256(mod))
			for _, name := range []string{f.plugin, f.plugin + "-alias"} {
				if _, err := root.plugins.UploadPlugin(ctx, &rewindv1.UploadPluginRequest{Name: name, Module: mod}); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := rootc.CreateUser(ctx, "victim-"+f.topic, 0); err != nil {
				t.Fatal(err)
			}
			var err error
			if f.signed, f.forged, err = resumeTokens(ctx, root, f.topic); err != nil {
				t.Fatal(err)
			}
			var needs [][][2]string // alternatives of op, resource
			for _, n := range mc.needs {
				var alts [][2]string
				for _, alt := range strings.Split(n, "|") {
					op, res, _ := strings.Cut(strings.NewReplacer("{topic}", f.topic, "{group}", f.group, "{plugin}", f.plugin).Replace(alt), " ")
					alts = append(alts, [2]string{op, res})
				}
				needs = append(needs, alts)
			}
			exact := a.user(t, "exact-"+f.topic)
			for _, n := range needs {
				grantRule(t, rootc, "exact-"+f.topic, n[0][0], n[0][1], false)
			}
			var refused []struct {
				who   string
				token string
				want  connect.Code
			}
			refused = append(refused, struct {
				who   string
				token string
				want  connect.Code
			}{"anonymous", "", connect.CodeUnauthenticated})
			for j, n := range needs {
				who := fmt.Sprintf("but%d-%s", j, f.topic)
				tok := a.user(t, who)
				lacks := map[[2]string]bool{}
				var lacking []string
				for _, alt := range n {
					kind, _, _ := strings.Cut(alt[1], ":")
					lacks[[2]string{kind, alt[0]}] = true
					lacking = append(lacking, alt[0]+" "+alt[1])
				}
				for k, ops := range allOps {
					pat := "*"
					if k == "cluster" {
						pat = ""
					}
					var keep []string
					for _, op := range ops {
						if !lacks[[2]string{k, op}] {
							keep = append(keep, op)
						}
					}
					if len(keep) > 0 {
						grantRule(t, rootc, who, strings.Join(keep, ","), k+":"+pat, false)
					}
				}
				refused = append(refused, struct {
					who   string
					token string
					want  connect.Code
				}{"all but " + strings.Join(lacking, " or "), tok, connect.CodePermissionDenied})
			}
			before := snapshot(t, root)
			for _, r := range refused {
				if err := mc.call(ctx, newRPCs(a.url, r.token), f); code(err) != r.want {
					t.Errorf("%s: %v, want %v", r.who, err, r.want)
				}
			}
			if d := cmp.Diff(before, snapshot(t, root)); d != "" {
				t.Errorf("a refused call changed the state (-before +after):\n%s", d)
			}
			err = mc.call(ctx, newRPCs(a.url, exact), f)
			t.Logf("with exactly %v: %v", mc.needs, err)
			if code(err) == connect.CodePermissionDenied || code(err) == connect.CodeUnauthenticated {
				t.Errorf("with exactly %v: %v", mc.needs, err)
			}
		})
	}
}

// resumeTokens returns the resume token a stream of c's principal from
// the end of topic starts with (signed for that principal), and a
// hand-made one for offset 0.
func resumeTokens(ctx context.Context, c *rpcs, topic string) (signed, forged string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := c.sub.Subscribe(ctx, &rewindv1.SubscribeRequest{Topic: topic, Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_Latest{Latest: true}})})
	if err != nil {
		return "", "", err
	}
	defer st.Close()
	if !st.Receive() {
		return "", "", st.Err()
	}
	ev := st.Msg().GetStarted()
	signed = ev.GetResumeToken()
	if !strings.Contains(signed, ".") {
		return "", "", fmt.Errorf("resume token %q is not signed", signed)
	}
	forged = resume.Token{TopicID: ev.GetTopicId(), Positions: []resume.Position{{Partition: 0, Next: 0}}}.String()
	return signed, forged, nil
}

func grantRule(t *testing.T, root interface {
	GrantACL(context.Context, *rewindv1.AclRule) (*rewindv1.AclRule, error)
}, who, ops, res string, deny bool) {
	t.Helper()
	kind, pat, _ := strings.Cut(res, ":")
	if kind == "cluster" {
		pat = ""
	}
	if _, err := root.GrantACL(context.Background(), &rewindv1.AclRule{Principal: who, Kind: kind, Pattern: pat, Operations: strings.Split(ops, ","), Deny: deny}); err != nil {
		t.Fatalf("grant %s %s %s: %v", who, ops, res, err)
	}
}

// snapshot renders what a call could change: topics with their retention
// and offsets, groups with commits and members, plugins, users and rules.
func snapshot(t *testing.T, root *rpcs) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	ts, err := root.topics.ListTopics(ctx, &rewindv1.ListTopicsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range ts.GetTopics() {
		d, err := root.topics.DescribeTopic(ctx, &rewindv1.DescribeTopicRequest{Name: tp.GetName()})
		if err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("topic %s retention=%v", tp.GetName(), d.GetTopic().GetConfig().GetRetention())
		for _, p := range d.GetPartitions() {
			line += fmt.Sprintf(" p%d=[%d,%d)", p.GetPartition(), p.GetLogStartOffset(), p.GetEndOffset())
		}
		out = append(out, line)
	}
	gs, err := root.groups.ListGroups(ctx, &rewindv1.ListGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs.GetGroups() {
		d, err := root.groups.DescribeGroup(ctx, &rewindv1.DescribeGroupRequest{Group: g.GetGroup()})
		if err != nil {
			t.Fatal(err)
		}
		for _, gt := range d.GetTopics() {
			line := fmt.Sprintf("group %s %s members=%d gen=%d", g.GetGroup(), gt.GetTopic(), len(gt.GetMembers()), gt.GetGeneration())
			for _, p := range gt.GetPartitions() {
				line += fmt.Sprintf(" p%d=%d", p.GetPartition(), p.GetCommittedOffset())
			}
			out = append(out, line)
		}
	}
	ps, err := root.plugins.ListPlugins(ctx, &rewindv1.ListPluginsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps.GetPlugins() {
		out = append(out, fmt.Sprintf("plugin %s@%d %s", p.GetName(), p.GetVersion(), p.GetModule()))
	}
	us, err := root.auth.ListUsers(ctx, &rewindv1.ListUsersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us.GetUsers() {
		out = append(out, fmt.Sprintf("user %s %s", u.GetPrincipal(), u.GetTokenId()))
	}
	rs, err := root.auth.ListAcls(ctx, &rewindv1.ListAclsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs.GetRules() {
		out = append(out, fmt.Sprintf("rule %d %s %s %s %v %v", r.GetId(), r.GetPrincipal(), r.GetKind(), r.GetPattern(), r.GetOperations(), r.GetDeny()))
	}
	qs, err := root.auth.ListQuotas(ctx, &rewindv1.ListQuotasRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range slices.Sorted(maps.Keys(qs.GetQuotas())) {
		out = append(out, fmt.Sprintf("quota %s %v", p, qs.GetQuotas()[p]))
	}
	return out
}
