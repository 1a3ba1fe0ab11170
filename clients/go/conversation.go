package memoryd

import (
	"context"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v2"
)

// Key names a conversation; empty AgentID, OwnerID and ThreadScope take the server's defaults
// (main, default, root).
type Key struct {
	AgentID, OwnerID, Channel, ChatID, ThreadScope string
}

func (k Key) proto() *pb.Conversation {
	return &pb.Conversation{
		AgentId: k.AgentID, OwnerId: k.OwnerID, Channel: k.Channel, ChatId: k.ChatID,
		ThreadScope: k.ThreadScope,
	}
}

// User is a user message from sender.
func User(sender, content string) *pb.NewMessage {
	return &pb.NewMessage{Role: pb.Role_ROLE_USER, Sender: sender, Content: content}
}

// Assistant is an assistant message from sender.
func Assistant(sender, content string) *pb.NewMessage {
	return &pb.NewMessage{Role: pb.Role_ROLE_ASSISTANT, Sender: sender, Content: content}
}

// ConversationClient is one conversation's calls, with its key filled in (the same helper as
// the Python and TypeScript clients' ConversationClient).
type ConversationClient struct {
	client *Client
	Key    *pb.Conversation
}

// Conversation returns the helper of one conversation.
func (c *Client) Conversation(key Key) *ConversationClient {
	return &ConversationClient{client: c, Key: key.proto()}
}

// Append stores messages (all valid ones, or none).
func (cv *ConversationClient) Append(ctx context.Context, messages ...*pb.NewMessage) (*pb.AppendMessagesResponse, error) {
	return cv.client.Conversations.AppendMessages(ctx, &pb.AppendMessagesRequest{Conversation: cv.Key, Messages: messages})
}

// CommitTurn stores one turn's messages and marks the conversation for review.
func (cv *ConversationClient) CommitTurn(ctx context.Context, messages ...*pb.NewMessage) (*pb.CommitTurnResponse, error) {
	return cv.client.Conversations.CommitTurn(ctx, &pb.CommitTurnRequest{Conversation: cv.Key, Messages: messages})
}

// List returns the newest page of the current window (oldest first).
func (cv *ConversationClient) List(ctx context.Context, pageSize int32) (*pb.ListMessagesResponse, error) {
	return cv.client.Conversations.ListMessages(ctx, &pb.ListMessagesRequest{Conversation: cv.Key, PageSize: pageSize})
}

// Search finds messages of this conversation.
func (cv *ConversationClient) Search(ctx context.Context, query string) (*pb.SearchHistoryResponse, error) {
	return cv.client.Conversations.SearchHistory(ctx, &pb.SearchHistoryRequest{Scope: &pb.SearchHistoryRequest_Conversation{Conversation: cv.Key}, Query: query})
}

// Store keeps a fact learnt in this conversation.
func (cv *ConversationClient) Store(ctx context.Context, category pb.Category, key, value string) (*pb.StoreMemoryResponse, error) {
	return cv.client.Memory.StoreMemory(ctx, &pb.StoreMemoryRequest{
		Caller: &pb.StoreMemoryRequest_Conversation{Conversation: cv.Key}, Category: category, Key: key, Value: value,
	})
}

// Recall searches what is known (memories, and with source ALL the history too).
func (cv *ConversationClient) Recall(ctx context.Context, query string, scope pb.RecallScope) (*pb.RecallResponse, error) {
	return cv.client.Memory.Recall(ctx, &pb.RecallRequest{Conversation: cv.Key, Query: query, Scope: scope})
}

// Compose returns the context of the next model call for a model of this window (tokens).
func (cv *ConversationClient) Compose(ctx context.Context, contextWindow int64) (*pb.ComposeContextResponse, error) {
	return cv.client.Context.ComposeContext(ctx, &pb.ComposeContextRequest{Conversation: cv.Key, ContextWindow: contextWindow})
}

// PromptContext returns the owner's USER.md and MEMORY.md.
func (cv *ConversationClient) PromptContext(ctx context.Context) (*pb.GetPromptContextResponse, error) {
	return cv.client.Context.GetPromptContext(ctx, &pb.GetPromptContextRequest{AgentId: cv.Key.AgentId, OwnerId: cv.Key.OwnerId})
}
