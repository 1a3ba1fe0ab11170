package memoryd_test

import (
	"context"
	"fmt"
	"log"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	memoryd "github.com/memoryd/memoryd/clients/go"
	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v2"
)

// A channel adapter's turn: append what the user said, compose the next model call's context,
// and commit the turn.
func ExampleNewClient() {
	client, err := memoryd.NewClient("127.0.0.1:50051", memoryd.Options{Token: "adapter-token"})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	chat := client.Conversation(memoryd.Key{Channel: "telegram", ChatID: "42"})
	if _, err := chat.Append(ctx, memoryd.User("ada", "I'm vegetarian")); err != nil {
		log.Fatal(err)
	}
	composed, err := chat.Compose(ctx, 128000)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(composed.GetParts()))
}

// A refusal is a gRPC status: its code, its message for people, and google.rpc.ErrorInfo with
// the reason a program branches on and the field at fault.
func ExampleClient_errors() {
	client, err := memoryd.NewClient("127.0.0.1:50051", memoryd.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	_, err = client.Conversations.AppendMessages(context.Background(), &pb.AppendMessagesRequest{})
	if status.Code(err) == codes.InvalidArgument {
		for _, detail := range status.Convert(err).Details() {
			if info, ok := detail.(*errdetails.ErrorInfo); ok {
				fmt.Println(info.GetReason(), info.GetMetadata()["field"]) // REQUIRED conversation
			}
		}
	}
}

// A realtime voice session: finals are acknowledged once committed, and a cut stream resumes
// where the server's committed seq says.
func ExampleClient_OpenTranscript() {
	client, err := memoryd.NewClient("127.0.0.1:50051", memoryd.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	session, err := client.OpenTranscript(ctx, &pb.TranscriptOpen{DeviceId: "kitchen", SessionId: "s-1"})
	if err != nil {
		log.Fatal(err)
	}
	if err := session.Final(ctx, 1, pb.Speaker_SPEAKER_USER, "what's the weather"); err != nil {
		log.Fatal(err)
	}
	if _, err := session.End(ctx); err != nil {
		log.Fatal(err)
	}
}
