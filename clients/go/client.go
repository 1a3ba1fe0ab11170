package memoryd

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	pbv1 "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v2"
)

// DefaultTimeout is the deadline of a unary call whose context has none.
const DefaultTimeout = 30 * time.Second

// Options configure a connection.
type Options struct {
	// Token is sent as `authorization: Bearer <token>` with every call ("" sends none).
	Token string
	// Timeout is the deadline of unary calls whose context has none (0: DefaultTimeout).
	Timeout time.Duration
	// TLS, when set, secures the connection; nil connects in plain text (loopback, tests).
	TLS credentials.TransportCredentials
	// DialOptions are added after memoryd's own.
	DialOptions []grpc.DialOption
}

// Client is a connection to memoryd and the clients of its memoryd.v2 services, each named after
// what it holds.
type Client struct {
	conn *grpc.ClientConn
	// Conversations: what was said (append, list, search, clear, purge).
	Conversations pb.ConversationServiceClient
	// Memory: what is known (store, recall, update, archive, jobs).
	Memory pb.MemoryServiceClient
	// Context: what the next model call gets (compose, compact, the prompt files).
	Context pb.ContextServiceClient
	// Resources: the prompt files' revisions.
	Resources pb.ResourceServiceClient
	// Reviews: the background reviewer.
	Reviews pb.ReviewServiceClient
	// Overview: owners and activity.
	Overview pb.OverviewServiceClient
	// Admin: the operator's calls (a token with role admin).
	Admin pb.AdminServiceClient
}

// NewClient makes a client of memoryd at target ("host:port", or any gRPC target such as
// "dns:///memoryd.internal:50051"). As grpc.NewClient, it does not connect: the first call
// does, and reconnects as needed. Close releases it.
func NewClient(target string, options Options) (*Client, error) {
	timeout := options.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	transport := options.TLS
	if transport == nil {
		transport = insecure.NewCredentials()
	}
	dial := []grpc.DialOption{
		grpc.WithTransportCredentials(transport),
		grpc.WithDefaultServiceConfig(ServiceConfig()),
		grpc.WithChainUnaryInterceptor(unaryDefaults(options.Token, timeout), retryKeyedAppends),
		grpc.WithChainStreamInterceptor(streamDefaults(options.Token)),
	}
	conn, err := grpc.NewClient(target, append(dial, options.DialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("memoryd: cannot make a client of %s: %w", target, err)
	}
	return &Client{
		conn:          conn,
		Conversations: pb.NewConversationServiceClient(conn),
		Memory:        pb.NewMemoryServiceClient(conn),
		Context:       pb.NewContextServiceClient(conn),
		Resources:     pb.NewResourceServiceClient(conn),
		Reviews:       pb.NewReviewServiceClient(conn),
		Overview:      pb.NewOverviewServiceClient(conn),
		Admin:         pb.NewAdminServiceClient(conn),
	}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func withToken(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func unaryDefaults(token string, timeout time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		return invoker(withToken(ctx, token), method, req, reply, cc, opts...)
	}
}

// RetryAttempts is how often an idempotent call, or a keyed append, is tried in all.
const RetryAttempts = 4

// IsKeyedAppend says whether a call is an AppendMessages that is safe to send again: every
// message carries a client_message_id, so the server stores each once (and answers
// APPEND_OUTCOME_DUPLICATE).
// memoryd.v1's path (still served) is read the same way.
func IsKeyedAppend(method string, req any) bool {
	var keys []string
	switch request := req.(type) {
	case *pb.AppendMessagesRequest:
		if method != pb.ConversationService_AppendMessages_FullMethodName {
			return false
		}
		for _, message := range request.Messages {
			keys = append(keys, message.ClientMessageId)
		}
	case *pbv1.AppendMessagesRequest:
		if method != pbv1.MemoryService_AppendMessages_FullMethodName {
			return false
		}
		for _, message := range request.Messages {
			keys = append(keys, message.ClientMessageId)
		}
	default:
		return false
	}
	if len(keys) == 0 {
		return false
	}
	for _, key := range keys {
		if key == "" {
			return false
		}
	}
	return true
}

// retryKeyedAppends tries keyed appends again as the service config tries idempotent calls:
// on UNAVAILABLE, or a CANCELLED the caller did not ask for, within the call's deadline.
func retryKeyedAppends(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !IsKeyedAppend(method, req) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	delay := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := invoker(ctx, method, req, reply, cc, opts...)
		code := status.Code(err)
		if err == nil || attempt >= RetryAttempts || ctx.Err() != nil ||
			(code != codes.Unavailable && code != codes.Canceled) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

func streamDefaults(token string) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
		streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(withToken(ctx, token), desc, cc, method, opts...)
	}
}

// ServiceConfig is the gRPC service config memoryd's clients use: the calls the contract marks
// idempotent (idempotency_level NO_SIDE_EFFECTS or IDEMPOTENT) are retried on UNAVAILABLE, and on
// a CANCELLED the caller did not ask for (a server that stops cancels the calls it had not
// started yet: grpc/grpc#41785), up to four attempts with a growing backoff. Appends whose every
// message has a client_message_id are retried likewise (IsKeyedAppend). Every other unary call is
// retried only on a CANCELLED that came before the server's response headers: memoryd sends those
// before a stop could cut a call that is not safe to repeat, and gRPC never retries a call whose
// headers came, so such a call never ran. A write that may have committed is for the caller to
// send again.
func ServiceConfig() string {
	var idempotent, others []map[string]string
	for _, file := range []protoreflect.FileDescriptor{
		pb.File_memoryd_v2_conversation_service_proto, pb.File_memoryd_v2_memory_service_proto,
		pb.File_memoryd_v2_context_service_proto, pb.File_memoryd_v2_resource_service_proto,
		pb.File_memoryd_v2_review_service_proto, pb.File_memoryd_v2_overview_service_proto,
		pb.File_memoryd_v2_admin_service_proto,
		// memoryd.v1, still served: its stubs on this connection are retried alike.
		pbv1.File_memoryd_v1_memory_service_proto, pbv1.File_memoryd_v1_compaction_service_proto,
	} {
		services := file.Services()
		for i := 0; i < services.Len(); i++ {
			methods := services.Get(i).Methods()
			for j := 0; j < methods.Len(); j++ {
				method := methods.Get(j)
				if method.IsStreamingClient() || method.IsStreamingServer() {
					continue
				}
				name := map[string]string{
					"service": string(services.Get(i).FullName()),
					"method":  string(method.Name()),
				}
				options, _ := method.Options().(*descriptorpb.MethodOptions)
				level := options.GetIdempotencyLevel()
				if level == descriptorpb.MethodOptions_NO_SIDE_EFFECTS ||
					level == descriptorpb.MethodOptions_IDEMPOTENT {
					idempotent = append(idempotent, name)
				} else {
					others = append(others, name)
				}
			}
		}
	}
	for _, names := range [][]map[string]string{idempotent, others} {
		sort.Slice(names, func(a, b int) bool {
			return names[a]["service"]+names[a]["method"] < names[b]["service"]+names[b]["method"]
		})
	}
	policy := func(codes ...string) map[string]any {
		return map[string]any{
			"maxAttempts":          RetryAttempts,
			"initialBackoff":       "0.1s",
			"maxBackoff":           "1s",
			"backoffMultiplier":    2,
			"retryableStatusCodes": codes,
		}
	}
	config := map[string]any{
		"methodConfig": []any{
			map[string]any{"name": idempotent, "retryPolicy": policy("UNAVAILABLE", "CANCELLED")},
			map[string]any{"name": others, "retryPolicy": policy("CANCELLED")},
		},
	}
	text, _ := json.Marshal(config)
	return string(text)
}
