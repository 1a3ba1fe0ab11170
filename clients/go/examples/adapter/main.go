// A console channel adapter: each line of stdin is a user message. memoryd composes the context
// of the next model call; the reply is an echo, or the answer of an OpenAI-compatible model when
// OPENAI_BASE_URL and OPENAI_MODEL are set (OPENAI_API_KEY if it needs one); the turn is
// committed; then what memoryd knows about the user is printed.
//
//	go run ./examples/adapter -address 127.0.0.1:50051 -owner ada
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	memoryd "github.com/memoryd/memoryd/clients/go"
	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v2"
)

func main() {
	address := flag.String("address", envOr("MEMORYD_ADDRESS", "127.0.0.1:50051"), "memoryd address")
	owner := flag.String("owner", "default", "the user")
	chatID := flag.String("chat", "console", "the chat id")
	flag.Parse()
	client, err := memoryd.NewClient(*address, memoryd.Options{Token: os.Getenv("MEMORYD_TOKEN")})
	if err != nil {
		fail(err)
	}
	defer client.Close()
	chat := client.Conversation(memoryd.Key{OwnerID: *owner, Channel: "console", ChatID: *chatID})
	ctx := context.Background()
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		text := strings.TrimSpace(lines.Text())
		if text == "" {
			continue
		}
		composed, err := chat.Compose(ctx, 8000)
		if err != nil && !isNotFound(err) { // a new conversation has no record yet
			fail(err)
		}
		reply, err := answer(ctx, composed, text)
		if err != nil {
			fail(err)
		}
		fmt.Printf("assistant: %s\n", reply)
		if _, err := chat.CommitTurn(ctx, memoryd.User(*owner, text), memoryd.Assistant("adapter", reply)); err != nil {
			fail(err)
		}
		known, err := chat.Recall(ctx, "", pb.RecallScope_RECALL_SCOPE_ALL)
		if err != nil {
			fail(err)
		}
		for _, hit := range known.GetHits() {
			fmt.Printf("known: %s = %s\n", hit.GetMemory().GetKey(), hit.GetMemory().GetValue())
		}
	}
}

// answer echoes, or asks an OpenAI-compatible model with the composed context.
func answer(ctx context.Context, composed *pb.ComposeContextResponse, text string) (string, error) {
	base, model := os.Getenv("OPENAI_BASE_URL"), os.Getenv("OPENAI_MODEL")
	if base == "" || model == "" {
		return "echo: " + text, nil
	}
	var messages []map[string]string
	for _, part := range composed.GetParts() {
		role := strings.ToLower(strings.TrimPrefix(part.GetRole().String(), "ROLE_"))
		messages = append(messages, map[string]string{"role": role, "content": part.GetContent()})
	}
	messages = append(messages, map[string]string{"role": "user", "content": text})
	body, _ := json.Marshal(map[string]any{"model": model, "messages": messages})
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	request, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	request.Header.Set("content-type", "application/json")
	if key := os.Getenv("OPENAI_API_KEY"); key != "" {
		request.Header.Set("authorization", "Bearer "+key)
	}
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		return "", err
	}
	defer response.Body.Close()
	var decoded struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(response.Body).Decode(&decoded); err != nil || len(decoded.Choices) == 0 {
		return "", fmt.Errorf("the model answered %s without a choice", response.Status)
	}
	return decoded.Choices[0].Message.Content, nil
}

func isNotFound(err error) bool {
	return status.Code(err) == codes.NotFound
}

func envOr(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
