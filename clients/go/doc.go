// Package memoryd is the Go client of memoryd, the long-term memory of conversational agents.
//
// The generated stubs live in package memorydv2 (gen/memoryd/v2; memoryd.v1, still served, in
// gen/memoryd/v1); this package adds what every
// adapter needs around them: NewClient with a bearer token and a default deadline, retries of
// the idempotent calls through the gRPC service config, a ConversationClient helper, and a
// transcript stream that resumes after a reconnect and replays what was not acknowledged.
// Errors are gRPC statuses: status.Code(err), and status.Convert(err).Details() for the
// google.rpc.ErrorInfo that says why (its Reason) and which field.
//
//	client, err := memoryd.NewClient("127.0.0.1:50051", memoryd.Options{})
//	chat := client.Conversation(memoryd.Key{Channel: "telegram", ChatID: "42"})
//	_, err = chat.Append(ctx, memoryd.User("ada", "I'm vegetarian"))
package memoryd
