// The Go side of the cross-language test (tests/test_clients.py):
//
//	xlang append ADDRESS OWNER CHAT TEXT   stores TEXT as a user message, prints its id
//	xlang recall ADDRESS OWNER CHAT QUERY  prints the matching messages' contents as JSON
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	memoryd "github.com/memoryd/memoryd/clients/go"
	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v2"
)

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: xlang append|recall ADDRESS OWNER CHAT TEXT")
		os.Exit(2)
	}
	action, address, owner, chatID, text := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5]
	client, err := memoryd.NewClient(address, memoryd.Options{})
	if err != nil {
		fail(err)
	}
	defer client.Close()
	chat := client.Conversation(memoryd.Key{OwnerID: owner, Channel: "xlang", ChatID: chatID})
	ctx := context.Background()
	switch action {
	case "append":
		appended, err := chat.Append(ctx, memoryd.User(owner, text))
		if err != nil {
			fail(err)
		}
		fmt.Println(appended.GetResults()[0].GetId())
	case "recall":
		recalled, err := client.Memory.Recall(ctx, &pb.RecallRequest{
			Conversation: chat.Key, Query: text, Source: pb.RecallSource_RECALL_SOURCE_HISTORY,
		})
		if err != nil {
			fail(err)
		}
		contents := []string{}
		for _, hit := range recalled.GetHits() {
			contents = append(contents, hit.GetMessage().GetMessage().GetContent())
		}
		encoded, _ := json.Marshal(contents)
		fmt.Println(string(encoded))
	default:
		fail(fmt.Errorf("unknown action %q", action))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
