package memoryd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pbv1 "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v2"
)

// The server under test: $MEMORYD_ADDRESS when given (it must store transcripts), otherwise a
// memoryd started here on a free port with its own data directory ($MEMORYD_PYTHON -m memoryd).
var address string

func TestMain(m *testing.M) {
	address = os.Getenv("MEMORYD_ADDRESS")
	stop := func() {}
	if address == "" {
		var err error
		address, stop, err = startServer()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

func startServer() (string, func(), error) {
	python := os.Getenv("MEMORYD_PYTHON")
	if python == "" {
		python = "python3"
	}
	home, err := os.MkdirTemp("", "memoryd-go-test-")
	if err != nil {
		return "", nil, err
	}
	config := filepath.Join(home, "test-config.toml")
	if err := os.WriteFile(config, []byte("[memoryd.realtime]\npersist_transcripts = true\n"), 0o600); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(python, "-m", "memoryd", "serve", "--home", filepath.Join(home, "data"),
		"--listen", "127.0.0.1:0", "--config", config)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("cannot start memoryd with %s: %w", python, err)
	}
	found := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stderr)
		scanner.Buffer(make([]byte, 1<<20), 1<<20)
		for scanner.Scan() {
			var record struct{ Event, Address string }
			if json.Unmarshal(scanner.Bytes(), &record) == nil && record.Event == "serving" {
				found <- record.Address
			}
		}
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = os.RemoveAll(home)
	}
	select {
	case served := <-found:
		return served, stop, nil
	case <-time.After(60 * time.Second):
		stop()
		return "", nil, fmt.Errorf("memoryd did not start within 60 s")
	}
}

func connect(t *testing.T) *Client {
	t.Helper()
	client, err := NewClient(address, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

func unique(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

func TestAppendListSearchKeepTextByteForByte(t *testing.T) {
	ctx := context.Background()
	chat := connect(t).Conversation(Key{OwnerID: "go-tests", Channel: "telegram", ChatID: unique("chat")})
	text := "Meet me in 東京 at 🍣 time, naïve café"
	appended, err := chat.Append(ctx, User("ada", text), Assistant("bot", "Booked."))
	if err != nil {
		t.Fatal(err)
	}
	if len(appended.GetResults()) != 2 || appended.GetResults()[0].GetOutcome() != pb.AppendOutcome_APPEND_OUTCOME_STORED {
		t.Fatalf("unexpected append results: %v", appended.GetResults())
	}
	listed, err := chat.List(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := listed.GetMessages(); len(got) != 2 || got[0].GetContent() != text || got[1].GetContent() != "Booked." {
		t.Fatalf("listed %v", got)
	}
	found, err := chat.Search(ctx, "東京")
	if err != nil {
		t.Fatal(err)
	}
	// The word match comes first; once vectors are made, hybrid search may add the other
	// message of the conversation by its meaning.
	if len(found.GetHits()) < 1 || found.GetHits()[0].GetMessage().GetContent() != text {
		t.Fatalf("search found %v", found.GetHits())
	}
}

func TestStoreRecallAndThePromptContext(t *testing.T) {
	ctx := context.Background()
	owner := unique("owner")
	chat := connect(t).Conversation(Key{OwnerID: owner, Channel: "telegram", ChatID: "c"})
	if _, err := chat.Store(ctx, pb.Category_CATEGORY_PREFERENCE, "diet", "Vegetarian, no fish"); err != nil {
		t.Fatal(err)
	}
	recalled, err := chat.Recall(ctx, "vegetarian", pb.RecallScope_RECALL_SCOPE_OWNER)
	if err != nil {
		t.Fatal(err)
	}
	if len(recalled.GetHits()) != 1 || recalled.GetHits()[0].GetMemory().GetValue() != "Vegetarian, no fish" {
		t.Fatalf("recalled %v", recalled.GetHits())
	}
	prompt, err := chat.PromptContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prompt.GetUserMd(), "Vegetarian, no fish") {
		t.Fatalf("USER.md is %q", prompt.GetUserMd())
	}
	if _, err := chat.CommitTurn(ctx, User("ada", "what should I cook?"), Assistant("bot", "Dal.")); err != nil {
		t.Fatal(err)
	}
	composed, err := chat.Compose(ctx, 8000)
	if err != nil {
		t.Fatal(err)
	}
	parts := composed.GetParts()
	if len(parts) < 3 || !strings.Contains(parts[0].GetContent(), "Vegetarian, no fish") ||
		parts[len(parts)-1].GetContent() != "Dal." {
		t.Fatalf("composed %v", parts)
	}
}

func TestErrorsCarryTheStatusAndTheServersMessage(t *testing.T) {
	client := connect(t)
	_, err := client.Conversations.AppendMessages(context.Background(), &pb.AppendMessagesRequest{
		Conversation: &pb.Conversation{ChatId: "x"},
		Messages:     []*pb.NewMessage{User("ada", "hi")},
	})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "conversation.channel is required") {
		t.Fatalf("got %v", err)
	}
	var info *errdetails.ErrorInfo
	for _, detail := range status.Convert(err).Details() {
		if found, ok := detail.(*errdetails.ErrorInfo); ok {
			info = found
		}
	}
	if info == nil || info.GetReason() != "REQUIRED" || info.GetMetadata()["field"] != "conversation.channel" || info.GetDomain() != "memoryd" {
		t.Fatalf("error details %v", info)
	}
}

func TestServiceConfigRetriesWritesOnlyOnACancelBeforeTheHeaders(t *testing.T) {
	var config struct {
		MethodConfig []struct {
			Name []struct {
				Service, Method string
			}
			RetryPolicy struct {
				RetryableStatusCodes []string
			}
		}
	}
	if err := json.Unmarshal([]byte(ServiceConfig()), &config); err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	for _, entry := range config.MethodConfig {
		for _, name := range entry.Name {
			codes[name.Method] = strings.Join(entry.RetryPolicy.RetryableStatusCodes, ",")
		}
	}
	for _, method := range []string{"ListMessages", "Recall", "GetPromptContext", "ComposeContext"} {
		if codes[method] != "UNAVAILABLE,CANCELLED" {
			t.Errorf("%s is retried on %q", method, codes[method])
		}
	}
	for _, method := range []string{"AppendMessages", "CommitTurn", "StoreMemory", "ClearConversation"} {
		if codes[method] != "CANCELLED" {
			t.Errorf("%s is retried on %q, want CANCELLED only", method, codes[method])
		}
	}
	if _, found := codes["StreamTranscript"]; found {
		t.Errorf("a stream must not be retried: %v", codes)
	}
}

func TestAnAppendIsRetriedOnlyWhenEveryMessageHasAClientMessageID(t *testing.T) {
	keyed := &pb.NewMessage{Content: "hi", ClientMessageId: "m-1"}
	method := pb.ConversationService_AppendMessages_FullMethodName
	cases := []struct {
		method string
		req    any
		want   bool
	}{
		{method, &pb.AppendMessagesRequest{Messages: []*pb.NewMessage{keyed, {Content: "b", ClientMessageId: "m-2"}}}, true},
		{method, &pb.AppendMessagesRequest{Messages: []*pb.NewMessage{keyed, {Content: "no key"}}}, false},
		{method, &pb.AppendMessagesRequest{}, false},
		{pb.ConversationService_CommitTurn_FullMethodName, &pb.CommitTurnRequest{Messages: []*pb.NewMessage{keyed}}, false},
		// memoryd.v1's path, still served, is read the same way; a v2 request on it is not.
		{pbv1.MemoryService_AppendMessages_FullMethodName, &pbv1.AppendMessagesRequest{Messages: []*pbv1.NewMessage{{Content: "a", ClientMessageId: "m-3"}}}, true},
		{pbv1.MemoryService_AppendMessages_FullMethodName, &pb.AppendMessagesRequest{Messages: []*pb.NewMessage{keyed}}, false},
	}
	for i, c := range cases {
		if got := IsKeyedAppend(c.method, c.req); got != c.want {
			t.Errorf("case %d: IsKeyedAppend = %v, want %v", i, got, c.want)
		}
	}
}

func TestATranscriptCutMidStreamResumesWithoutLossOrDuplicate(t *testing.T) {
	ctx := context.Background()
	client := connect(t)
	device := unique("kitchen")
	open := &pb.TranscriptOpen{DeviceId: device, SessionId: "s-1", OwnerId: "go-tests", Model: "rt"}
	session, err := client.OpenTranscript(ctx, open)
	if err != nil {
		t.Fatal(err)
	}
	if !session.Persisted {
		t.Skip("the server does not store transcripts (persist_transcripts is off)")
	}
	if err := session.Partial(ctx, 1, pb.Speaker_SPEAKER_USER, "what's the"); err != nil {
		t.Fatal(err)
	}
	if err := session.Final(ctx, 1, pb.Speaker_SPEAKER_USER, "what's the weather"); err != nil {
		t.Fatal(err)
	}
	if err := session.Final(ctx, 2, pb.Speaker_SPEAKER_ASSISTANT, "sunny, 21°C"); err != nil {
		t.Fatal(err)
	}
	// Final 3 is sent, then the stream is cut before its acknowledgement is read.
	third := &pb.TranscriptSegment{Seq: 3, Speaker: pb.Speaker_SPEAKER_USER, Text: "and tomorrow?"}
	session.pending = append(session.pending, third)
	if err := session.stream.Send(&pb.StreamTranscriptRequest{Kind: &pb.StreamTranscriptRequest_Segment{Segment: third}}); err != nil {
		t.Fatal(err)
	}
	session.Cut()
	if err := session.Final(ctx, 4, pb.Speaker_SPEAKER_ASSISTANT, "rain 雨"); err != nil {
		t.Fatal(err)
	}
	if session.Reconnects != 1 || !session.Resumed || session.Committed() != 4 {
		t.Fatalf("reconnects %d, resumed %v, committed %d", session.Reconnects, session.Resumed, session.Committed())
	}
	if _, err := session.End(ctx); err != nil {
		t.Fatal(err)
	}
	listed, err := client.Conversations.ListMessages(ctx, &pb.ListMessagesRequest{
		Conversation: &pb.Conversation{OwnerId: "go-tests", Channel: "realtime", ChatId: "local:" + device},
		PageSize:     100,
	})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, message := range listed.GetMessages() {
		texts = append(texts, message.GetContent())
	}
	want := []string{"what's the weather", "sunny, 21°C", "and tomorrow?", "rain 雨"}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Fatalf("stored %q, want %q", texts, want)
	}
}
